// A bounded, derivative-free local search (NLopt's subplex, LN_SBPLX), the one both fitters run:
// the kernel calibration (calibrate_fit.cc) and the collective calibration (collective_fit.cc).
// Deterministic: it stops at a relative change or a number of evaluations, never a time limit.
#pragma once

#include <functional>
#include <vector>

namespace meshsim::validation::detail {

using Objective = std::function<double(const std::vector<double>&)>;

struct BoxSearch {
  std::vector<double> lower;  // per coordinate
  std::vector<double> upper;
  double initial_step = 0.1;  // the first step along each axis
  double ftol_rel = 1e-12;    // stop when the objective changes by less, relatively
  double xtol_rel = 1e-10;    // ... or every coordinate does
  int max_evaluations = 1000;
};

// The point the search reaches from `x` inside the box (x itself is clamped by NLopt's bounds).
std::vector<double> minimize_in_box(const Objective& f, std::vector<double> x,
                                    const BoxSearch& search);

}  // namespace meshsim::validation::detail
