// A published run's mapped scenario simulated through the one step every verb runs.
#include <utility>

#include "meshsim/scenario/located.h"
#include "meshsim/sim/error.h"
#include "meshsim/validation/published.h"

namespace meshsim::validation {

scenario::Scenario scenario_of(const PublishedScenario& s) {
  scenario::Scenario out;
  out.model = s.model.name;
  out.cluster = s.cluster.name;
  out.plan = s.plan;
  return out;
}

std::variant<scenario::StepReport, NotExpressible> simulate_published(
    const PublishedScenario& s, scenario::StepOptions options, scenario::StepObserver* observer) {
  const scenario::Scenario run = scenario_of(s);
  options.skip_memory_precheck = true;
  try {
    return scenario::located(run, [&] {
      return scenario::simulate_step(run, scenario::LoadedScenario{s.cluster, s.model}, options,
                                     observer);
    });
  } catch (const OutputError&) {
    throw;  // the observer's file (validate-published --run --trace), not the run
  } catch (const InputError& e) {
    return refused_scenario(e);
  } catch (const InfeasibleError& e) {  // a kernel or step past meshsim's clock
    return refused_scenario(e);
  }
}

}  // namespace meshsim::validation
