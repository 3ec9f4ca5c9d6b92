#include "meshsim/traces/chrome_trace.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "test_models.h"

namespace meshsim::traces {
namespace {

std::string run_and_trace() {
  testing::PsComputeModel cm;
  testing::PsCommModel nm;
  Simulation sim(cm, nm);
  const GroupId g = sim.add_group({RankId(0), RankId(1)});
  Program p;
  p.set_initial_memory(MemoryCategory::kWeights, GiB(1));
  const OpId a = p.add(testing::compute_op("fwd \"quoted\"", 1'500'000));
  const OpId b = p.add(testing::collective_op("grad all-reduce", 1'000'000));
  p.add_dependency(a, b);
  const auto prog = sim.add_program(std::move(p));
  sim.add_rank(prog, {g}, {});
  sim.add_rank(prog, {g}, {});
  std::ostringstream out;
  ChromeTraceOptions options;
  options.rank_name = [](RankId r) { return fmt::format("gpu {}", r.value()); };
  options.metadata = {{"model", "test"}};
  ChromeTraceWriter w(sim, out, options);
  sim.run();
  w.finish();
  return out.str();
}

TEST(ChromeTrace, FormatsPicosecondsExactly) {
  EXPECT_EQ(format_us(SimTime::from_ps(1'500'000)), "1.500000");
  EXPECT_EQ(format_us(SimTime::from_ps(7)), "0.000007");
  EXPECT_EQ(format_us(Duration::from_ps(-3'000'001)), "-3.000001");
}

TEST(ChromeTrace, WritesValidJsonWithSlicesTracksAndMetadata) {
  const auto j = nlohmann::json::parse(run_and_trace());
  int slices = 0;
  int names = 0;
  int counters = 0;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "X") {
      ++slices;
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    } else if (ph == "M") {
      ++names;
    } else if (ph == "C") {
      ++counters;
    }
  }
  EXPECT_EQ(slices, 4);    // 2 ops x 2 ranks
  EXPECT_EQ(names, 2 * 2 + 2 * 2);  // thread names (2 streams x 2 ranks) + process name/sort
  EXPECT_EQ(counters, 2);  // initial weights per rank
  EXPECT_EQ(j["metadata"]["model"], "test");
}

TEST(ChromeTrace, ByteIdenticalAcrossRuns) { EXPECT_EQ(run_and_trace(), run_and_trace()); }

}  // namespace
}  // namespace meshsim::traces
