// The report field table (scenario/report_fields.h) and what it drives: `meshsim run --json`,
// the exact exchange of reports between processes (report_state) and compare's metrics.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "meshsim/scenario/report_fields.h"
#include "meshsim/scenario/step_report.h"
#include "meshsim/scenario/compare.h"
#include "report_state.h"

namespace meshsim::scenario {
namespace {

using nlohmann::json;

// A report whose every tabled field holds a value of its own (row i: 10 + i of its type), which
// no default holds, so that a row the bindings drop or mix up shows.
StepReport distinct_report() {
  StepReport r;
  int i = 0;
  for (const ReportFieldSpec& f : report_fields()) {
    const int n = 10 + i++;
    json v = std::visit(
        [n](auto m) -> json {
          using T = std::remove_cvref_t<decltype(std::declval<StepReport&>().*m)>;
          if constexpr (std::is_same_v<T, bool>) {
            return true;
          } else if constexpr (std::is_same_v<T, std::string>) {
            return "value " + std::to_string(n);
          } else if constexpr (std::is_same_v<T, double> || std::is_same_v<T, Flops> ||
                               std::is_same_v<T, FlopsPerSec>) {
            return n + 0.25;
          } else if constexpr (std::is_same_v<T, Duration>) {
            return int64_t{1'000'000'000'000} + n;  // picoseconds: a second and n ps
          } else {
            return n;
          }
        },
        f.member);
    f.set_exact(r, v);
  }
  return r;
}

TEST(ReportFieldTable, KeysAreUniqueAndUnitsMatchTheirTypes) {
  std::set<std::string> keys;
  for (const ReportFieldSpec& f : report_fields()) {
    EXPECT_TRUE(keys.insert(f.key).second) << f.key;
    EXPECT_EQ(&report_field(f.key), &f);
    const std::string unit = f.unit;
    if (std::holds_alternative<Duration StepReport::*>(f.member)) {
      EXPECT_EQ(unit, "s") << f.key;
    }
    if (std::holds_alternative<Bytes StepReport::*>(f.member)) {
      EXPECT_EQ(unit, "B") << f.key;
    }
    EXPECT_TRUE(!f.column || f.written) << f.key << ": a column of a value the report omits";
  }
}

TEST(ReportFieldTable, ExactStateRoundTripsEveryField) {
  const StepReport r = distinct_report();
  const StepReport back = studies::detail::report_from_state(studies::detail::report_state(r));
  for (const ReportFieldSpec& f : report_fields()) {
    EXPECT_EQ(f.exact(back), f.exact(r)) << f.key;
    EXPECT_NE(f.exact(back), f.exact(StepReport{})) << f.key;
  }
}

TEST(ReportFieldTable, RunJsonWritesEveryWrittenFieldInItsUnit) {
  const StepReport r = distinct_report();
  const json j = to_json(r);
  for (const ReportFieldSpec& f : report_fields()) {
    if (f.written) {
      ASSERT_TRUE(j.contains(f.key)) << f.key;
      EXPECT_EQ(j.at(f.key), f.value(r)) << f.key;
    }
  }
  EXPECT_DOUBLE_EQ(j.at("step_time_s").get<double>(), r.step_time.seconds());
}

TEST(ReportFieldTable, CompareSetsEveryComparedFieldSideBySide) {
  StepReport a = distinct_report();
  a.simulated = true;
  a.inputs = json::object();
  StepReport b = a;
  b.step_time = a.step_time + Seconds(1);
  const json c = compare_reports(to_json(a), "a.json", to_json(b), "b.json");
  std::vector<std::string> expected;
  for (const ReportFieldSpec& f : report_fields()) {
    if (f.compare != nullptr) {
      expected.emplace_back(f.compare);
      if (std::string(f.key) == "exposed_comm_s") {
        expected.emplace_back("idle (bubble, waits)");
      }
    }
  }
  std::vector<std::string> names;
  for (const json& m : c.at("metrics")) {
    names.push_back(m.at("name"));
  }
  EXPECT_EQ(names, expected);
  EXPECT_DOUBLE_EQ(c.at("metrics").at(0).at("delta").get<double>(), 1.0);
}

}  // namespace
}  // namespace meshsim::scenario
