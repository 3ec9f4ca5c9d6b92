// The validation library's manifest and profile (validation/include/meshsim/validation/
// manifest.h, profile.h): typed values from the committed CPU smoke fixture, the plan a manifest
// stands for, and the fitted profile document.
#include "meshsim/validation/manifest.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "meshsim/sim/error.h"
#include "meshsim/validation/profile.h"
#include "validation_test_util.h"

namespace meshsim::validation::test {
namespace {

TEST(Manifest, ReadsTypedTimesAndExecution) {
  const nlohmann::json doc = read_json_file(kManifest);
  const Manifest m = load_manifest(kManifest);
  EXPECT_EQ(m.case_name, doc["case"].get<std::string>());
  EXPECT_EQ(m.median_step, Seconds(doc["median_step_time_s"].get<double>()));
  ASSERT_EQ(m.step_times.size(), doc["step_times_s"].size());
  for (size_t i = 0; i < m.step_times.size(); ++i) {
    EXPECT_EQ(m.step_times[i], Seconds(doc["step_times_s"][i].get<double>()));
  }
  ASSERT_TRUE(m.profiler_overhead_per_event);
  EXPECT_EQ(*m.profiler_overhead_per_event,
            Seconds(doc["trace"]["profiler_overhead_per_event_s"].get<double>()));
  // The fixture ran fp32, eager, naive attention, per-tensor AdamW.
  EXPECT_EQ(m.dtype, Dtype::kFp32);
  EXPECT_EQ(m.kernels, workloads::Kernels::kEager);
  EXPECT_EQ(m.attention, workloads::AttentionKernel::kNaive);
  EXPECT_EQ(m.optimizer_kernels, workloads::OptimizerKernels::kPerTensor);
  EXPECT_EQ(workloads::to_string(m.attention), doc["execution"]["attention"].get<std::string>());
}

TEST(Manifest, PlanIsOneDeviceRunningTheManifestsExecution) {
  const Manifest m = load_manifest(kManifest);
  const workloads::ParallelPlan p = manifest_plan(m);
  EXPECT_EQ(p.world(), 1);
  EXPECT_EQ(p.mbs, m.micro_batch);
  EXPECT_EQ(p.gbs, m.global_batch);
  EXPECT_EQ(p.seq, m.seq);
  EXPECT_EQ(p.matmul_dtype, Dtype::kFp32);
  EXPECT_EQ(p.activation_bytes, 4);  // fp32 training keeps fp32 activations
  EXPECT_EQ(p.kernels, workloads::Kernels::kEager);
  EXPECT_EQ(p.attention, workloads::AttentionKernel::kNaive);
  EXPECT_EQ(p.optimizer_kernels, workloads::OptimizerKernels::kPerTensor);
  EXPECT_EQ(p.microbatches(), m.global_batch / m.micro_batch);
  // Its kernels are what the engine runs: a single device never communicates.
  const std::vector<StepKernel> kernels = step_kernels(m);
  ASSERT_FALSE(kernels.empty());
  const Profile profile = load_profile(kProfile);
  const RunResult r = ManifestRun(m, profile.chip).run();
  EXPECT_GT(r.end.since_start(), Duration::zero());
}

// Issue 10: a plan error from a manifest's value names the manifest and the field, not a flag.
TEST(Manifest, PlanErrorsNameTheManifestField) {
  Manifest m = load_manifest(kManifest);
  m.global_batch = m.micro_batch + 1;  // not a multiple of the micro-batch
  try {
    (void)step_kernels(m);
    FAIL() << "a global batch that the micro-batch does not divide was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.source(), m.path);
    EXPECT_EQ(e.location(), "/batch/global_batch");
    EXPECT_EQ(std::string(e.what()).find("--"), std::string::npos) << e.what();
  }
}

TEST(Profile, FittedDocumentLoadsWithTheFittedValues) {
  const Profile base = load_profile(kProfile);
  topology::Efficiency e =
      efficiency(base.chip.efficiency, 0.625, 0.25, Microseconds(7.25), 40.5, Nanoseconds(2443.1));
  e.memory_by_class[static_cast<size_t>(OpClass::kNorm)] = 0.1875;
  const nlohmann::json doc = profile_document(base, e, "a test");
  const Profile p = profile_from(doc, "fitted.json");
  const topology::Efficiency& got = p.chip.efficiency;
  EXPECT_EQ(got.matmul, 0.625);
  EXPECT_EQ(got.memory, 0.25);
  EXPECT_EQ(got.launch_overhead, Microseconds(7.25));
  ASSERT_TRUE(got.matmul_shape);
  EXPECT_EQ(got.matmul_shape->k_half, 40.5);
  EXPECT_EQ(got.matmul_shape->call_overhead, Nanoseconds(2443.1));  // a tenth of a ns is kept
  EXPECT_EQ(got.matmul_shape->tile_m, base.chip.efficiency.matmul_shape->tile_m);
  EXPECT_EQ(got.memory_by_class[static_cast<size_t>(OpClass::kNorm)], 0.1875);
  EXPECT_FALSE(got.memory_by_class[static_cast<size_t>(OpClass::kCopy)]);
  EXPECT_EQ(p.chip.source_of("/efficiency/matmul"), "a test");
  // Everything else is the base profile's.
  EXPECT_EQ(p.chip.hbm_bandwidth, base.chip.hbm_bandwidth);
  EXPECT_EQ(doc["chips"][base.chip_name]["description"],
            base.document["chips"][base.chip_name]["description"]);
}

TEST(Profile, MoreThanOneChipIsAnInputError) {
  nlohmann::json doc = load_profile(kProfile).document;
  const std::string name = doc["chips"].begin().key();
  doc["chips"]["second"] = doc["chips"][name];
  EXPECT_THROW((void)profile_from(doc, "two.json"), InputError);
}

}  // namespace
}  // namespace meshsim::validation::test
