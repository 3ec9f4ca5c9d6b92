// Workbook case 8.5 through the engine rather than the closed form: a 0.35 ms communication that
// runs beside 0.42 ms of independent compute on another stream is fully hidden.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "../sim/test_models.h"
#include "meshsim/sim/analysis.h"
#include "meshsim/sim/simulation.h"

namespace meshsim {
namespace {

class FixedCompute : public ComputeCostModel {
 public:
  Duration compute_time(RankId, const ComputeWork& w) const override {
    return Seconds(w.flops.count());  // the test encodes seconds as FLOPs
  }
};

// Every communication takes `d`, on its own.
IsolatedCommModel fixed_comm(Duration d) {
  return IsolatedCommModel([d](CollectiveKind, Bytes, std::span<const RankId>) { return d; },
                           [d](RankId, RankId, Bytes) { return d; });
}

double hidden_fraction(double comm_ms, double compute_ms) {
  FixedCompute cm;
  IsolatedCommModel nm = fixed_comm(Milliseconds(comm_ms));
  Simulation sim(cm, nm);
  Program p;
  Op c;
  c.name = "compute";
  c.work = ComputeWork{OpClass::kMatmul, Dtype::kBf16, Flops::of(compute_ms * 1e-3), Bytes::zero(),
                       {}, {}};
  p.add(std::move(c));
  Op ar;
  ar.name = "allreduce";
  ar.stream = 1;
  ar.work = CollectiveWork{CollectiveKind::kAllReduce, MB(1), 0};
  p.add(std::move(ar));
  const RankBreakdown b = testing::run_on_two_ranks(sim, std::move(p)).first;
  return 1.0 - b.exposed_comm / b.comm;
}

TEST(Workbook, Case8_5HiddenCommunicationThroughTheEngine) {
  std::ifstream in(std::string(MESHSIM_SOURCE_DIR) + "/validation/workbook/workbook_cases.json");
  ASSERT_TRUE(in) << "cannot read workbook_cases.json";
  const auto doc = nlohmann::json::parse(in);
  bool found = false;
  for (const auto& c : doc["cases"]) {
    if (c["id"] == "8.5") {
      found = true;
      const double got = hidden_fraction(c["inputs"]["comm_ms"].get<double>(),
                                         c["inputs"]["overlapping_compute_ms"].get<double>());
      EXPECT_NEAR(got, c["expected"].get<double>(), c["rel_tol"].get<double>());
    }
  }
  EXPECT_TRUE(found);
}

TEST(Overlap, PartialOverlapExposesTheRemainder) {
  // 0.5 ms of communication beside 0.2 ms of compute: 0.3 ms is exposed, 40% hidden.
  EXPECT_NEAR(hidden_fraction(0.5, 0.2), 0.4, 1e-9);
}

}  // namespace
}  // namespace meshsim
