#include "box_search.h"

#include <nlopt.hpp>

namespace meshsim::validation::detail {
namespace {

// NLopt takes the objective as a C function and a void* (its API, nlopt.hpp): the one place where
// a void* stands for a typed callable.
double call_objective(const std::vector<double>& x, std::vector<double>& /*gradient: unused*/,
                      void* objective) {
  return (*static_cast<const Objective*>(objective))(x);
}

}  // namespace

std::vector<double> minimize_in_box(const Objective& f, std::vector<double> x,
                                    const BoxSearch& search) {
  nlopt::opt opt(nlopt::LN_SBPLX, static_cast<unsigned>(x.size()));
  opt.set_lower_bounds(search.lower);
  opt.set_upper_bounds(search.upper);
  opt.set_min_objective(call_objective, const_cast<Objective*>(&f));
  opt.set_initial_step(search.initial_step);
  opt.set_ftol_rel(search.ftol_rel);
  opt.set_xtol_rel(search.xtol_rel);
  opt.set_maxeval(search.max_evaluations);
  double value = 0;
  try {
    opt.optimize(x, value);
  } catch (const nlopt::roundoff_limited&) {
    // Converged as far as floating point allows: x holds the best point found.
  }
  return x;
}

}  // namespace meshsim::validation::detail
