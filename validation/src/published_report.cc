// Errors of meshsim against the published runs, and the thresholds CI holds them to.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/sim/median.h"
#include "meshsim/validation/published.h"

namespace meshsim::validation {
namespace {

// Sequences at least this long count as attention-heavy (the "seq >= 16K").
constexpr int64_t kLongSequence = 16384;

}  // namespace

ErrorSummary summarize(const std::vector<double>& errors) {
  ErrorSummary s;
  s.points = errors.size();
  if (errors.empty()) {
    return s;
  }
  std::vector<double> abs;
  for (const double e : errors) {
    abs.push_back(std::fabs(e));
  }
  s.median_abs = *median(abs);
  s.median_signed = *median(errors);
  std::sort(abs.begin(), abs.end());
  // Nearest rank: the smallest value with at least 90% of the points at or below it.
  const auto rank = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(abs.size())));
  s.p90_abs = abs[std::max<size_t>(rank, 1) - 1];
  return s;
}

PublishedReport evaluate_published(const std::vector<PublishedRun>& runs,
                                   const topology::Catalogue& catalogue) {
  PublishedReport report;
  std::vector<double> overall, fp8, long_seq;
  std::map<std::string, std::vector<double>> by_source, by_precision;
  for (const PublishedRun& run : runs) {
    const PublishedMapping mapping = map_published_run(run, catalogue);
    if (const auto* no = std::get_if<NotExpressible>(&mapping)) {
      report.not_expressed.emplace_back(run.id, no->reason);
      continue;
    }
    const auto& scenario = std::get<PublishedScenario>(mapping);
    const std::variant<scenario::StepReport, NotExpressible> outcome =
        simulate_published(scenario);
    if (const auto* no = std::get_if<NotExpressible>(&outcome)) {
      report.not_expressed.emplace_back(run.id, no->reason);
      continue;
    }
    const auto& sim = std::get<scenario::StepReport>(outcome);
    PublishedPoint p;
    p.id = run.id;
    p.source_group = run.source_group();
    p.precision_class = scenario.plan.matmul_dtype == Dtype::kFp8    ? "fp8"
                        : scenario.plan.matmul_dtype == Dtype::kFp16 ? "fp16"
                                                                      : "bf16";
    p.seq = scenario.plan.seq;
    p.measured = scenario.measured_step;
    p.simulated = sim.step_time;
    p.oom = sim.oom;
    p.peak_memory = sim.peak_memory;
    p.memory_capacity = sim.memory_capacity;
    p.time_by_class = sim.time_by_class;
    p.exposed_comm = sim.exposed_comm;
    p.error = sim.step_time / scenario.measured_step - 1.0;
    p.conversion = scenario.conversion;
    p.assumptions = scenario.assumptions;
    if (p.oom) {
      report.out_of_memory.push_back(std::move(p));
      continue;
    }
    (p.precision_class == "fp8" ? fp8 : overall).push_back(p.error);
    if (p.seq >= kLongSequence) {
      long_seq.push_back(p.error);
    }
    by_source[p.source_group].push_back(p.error);
    by_precision[p.precision_class].push_back(p.error);
    report.points.push_back(std::move(p));
  }
  report.overall = summarize(overall);
  report.fp8 = summarize(fp8);
  report.long_sequence = summarize(long_seq);
  for (const auto& [k, v] : by_source) {
    report.by_source[k] = summarize(v);
  }
  for (const auto& [k, v] : by_precision) {
    report.by_precision[k] = summarize(v);
  }
  return report;
}

PublishedThresholds load_published_thresholds(const std::string& path) {
  const nlohmann::json doc = load_json_file(path);
  JsonObject root(doc, path);
  root.allow_unknown();  // the file also holds the measured-trace thresholds
  JsonObject o = root.object("published");
  PublishedThresholds t;
  t.max_median_abs = o.fraction("max_median_abs_error");
  t.max_p90_abs = o.fraction("max_p90_abs_error");
  t.max_abs_median_signed = o.fraction("max_abs_median_signed_error");
  t.max_fp8_median_abs = o.fraction("max_fp8_median_abs_error");
  t.max_long_sequence_median_abs = o.fraction("max_long_sequence_median_abs_error");
  o.ignore("source");
  o.ignore("_doc");
  o.finish();
  return t;
}

std::vector<std::string> threshold_violations(const PublishedReport& r,
                                              const PublishedThresholds& t) {
  std::vector<std::string> out;
  const auto check = [&out](const char* what, double value, double limit) {
    if (value > limit) {
      out.push_back(fmt::format("{} {:.1f}% exceeds {:.1f}%", what, 100 * value, 100 * limit));
    }
  };
  check("median |error| (bf16/fp16)", r.overall.median_abs, t.max_median_abs);
  check("p90 |error| (bf16/fp16)", r.overall.p90_abs, t.max_p90_abs);
  check("|median error| (bf16/fp16)", std::fabs(r.overall.median_signed), t.max_abs_median_signed);
  check("median |error| (fp8)", r.fp8.median_abs, t.max_fp8_median_abs);
  check("median |error| (seq >= 16K)", r.long_sequence.median_abs, t.max_long_sequence_median_abs);
  return out;
}

}  // namespace meshsim::validation
