// The roofline compute model's shape-dependent GEMM efficiency and cache level
// (topology/compute_model.h), and the catalogue fields behind them (efficiency/matmul_shape, cache).
#include "meshsim/topology/compute_model.h"

#include <gtest/gtest.h>

#include <string>

#include "meshsim/sim/error.h"
#include "meshsim/topology/chip.h"
#include "test_files.h"

namespace meshsim::topology {
namespace {

using testing::capture_input_error;
using testing::expect_error;
using testing::read_source_json;

const std::string kProfile = "validation/profiles/cpu-amd-epyc-2c.json";
const std::string kChip = "cpu-amd-epyc-1core";

// The committed CPU profile's chip with round numbers: 100 TFLOP/s, HBM 10 GB/s, a 32 MiB cache at
// 100 GB/s, matmul 0.8, memory 0.5, launch 3 us; matmul_shape tile 128 x 128 on 132 units,
// k_half 64, call 2 us, batched as given.
nlohmann::json test_catalogue(const std::string& batched = "one_call") {
  nlohmann::json doc = read_source_json(kProfile);
  nlohmann::json& c = doc["chips"][kChip];
  c["peak"]["fp32"]["value"] = "100TFLOP/s";
  c["peak"]["bf16"]["value"] = "100TFLOP/s";
  c["hbm"]["bandwidth"]["value"] = "10GB/s";
  c["cache"]["capacity"]["value"] = "32MiB";
  c["cache"]["bandwidth"]["value"] = "100GB/s";
  nlohmann::json& e = c["efficiency"];
  e["matmul"]["value"] = 0.8;
  e["memory"]["value"] = 0.5;
  e["launch_overhead"]["value"] = "3us";
  e["matmul_shape"]["tile_m"]["value"] = 128;
  e["matmul_shape"]["tile_n"]["value"] = 128;
  e["matmul_shape"]["units"]["value"] = 132;
  e["matmul_shape"]["k_half"]["value"] = 64;
  e["matmul_shape"]["call_overhead"]["value"] = "2us";
  e["matmul_shape"]["batched"]["value"] = batched;
  return doc;
}

Chip test_chip(const std::string& batched = "one_call") {
  return Catalogue::parse(test_catalogue(batched), "test.json").chip(kChip);
}

ComputeWork gemm(int64_t m, int64_t k, int64_t n, int64_t batch = 1) {
  ComputeWork w;
  w.op_class = OpClass::kMatmul;
  w.dtype = Dtype::kFp32;
  w.flops = Flops::of(2.0 * static_cast<double>(m * k * n * batch));
  w.bytes = Bytes::of(4 * batch * (m * k + k * n + m * n));
  w.shape = MatmulShape{m, k, n, batch};
  return w;
}

ComputeWork streaming(Bytes bytes) {
  ComputeWork w;
  w.op_class = OpClass::kElementwise;
  w.dtype = Dtype::kFp32;
  w.flops = Flops::of(1.0);
  w.bytes = bytes;
  return w;
}

TEST(WaveQuantization, OneFullWaveIsOne) {
  const MatmulShapeEfficiency m{128, 128, 132, 0, Duration{}, false, {}};
  // 11 x 12 = 132 tiles of 128 x 128: exactly one wave on 132 units.
  EXPECT_DOUBLE_EQ(gemm_tiling(m, {1408, 64, 1536, 1}).quantization, 1.0);
}

TEST(WaveQuantization, OneRowTooManyCostsASecondWave) {
  const MatmulShapeEfficiency m{128, 128, 132, 0, Duration{}, false, {}};
  // m = 1409: 12 x 12 = 144 tiles, 2 waves of 132: 1409 * 1536 useful of 2 * 132 * 128 * 128.
  EXPECT_DOUBLE_EQ(gemm_tiling(m, {1409, 64, 1536, 1}).quantization,
                   1409.0 * 1536.0 / (2.0 * 132 * 16384));
}

TEST(WaveQuantization, BatchesShareWavesAndSmallTilesArePadded) {
  const MatmulShapeEfficiency m{128, 128, 132, 0, Duration{}, false, {}};
  // Two 100 x 100 GEMMs: 2 tiles, one (mostly idle) wave.
  EXPECT_DOUBLE_EQ(gemm_tiling(m, {100, 64, 100, 2}).quantization,
                   2.0 * 100 * 100 / (132.0 * 16384));
  EXPECT_THROW(gemm_tiling(m, {0, 64, 100, 1}), InternalError);
}

// Split-K (cuBLAS's split-K and stream-K kernels): a GEMM whose output tiles leave SMs idle runs
// its reduction in slices on the idle SMs, as many as make it fastest under k / (k + k_half).
TEST(SplitK, OneOutputTileSpreadsItsReductionOverEverySm) {
  const MatmulShapeEfficiency m{128, 128, 132, 384, Duration{}, false, {}, 64};
  // 15 x 98304 x 15 (a weight gradient of a tiny layer, k the batch): one tile; 132 slices of
  // 744.7 k each fill one wave, and the rate only grows with the slices here.
  const GemmTiling t = gemm_tiling(m, {15, 98304, 15, 1});
  EXPECT_EQ(t.slices, 132);
  EXPECT_DOUBLE_EQ(t.quantization, 15.0 * 15 * 132 / (132.0 * 16384));
  EXPECT_DOUBLE_EQ(t.k_per_slice, 98304.0 / 132);
  // Without split_k_min the same GEMM is one tile on one SM.
  const MatmulShapeEfficiency whole{128, 128, 132, 384, Duration{}, false, {}, 0};
  EXPECT_EQ(gemm_tiling(whole, {15, 98304, 15, 1}).slices, 1);
  EXPECT_DOUBLE_EQ(gemm_tiling(whole, {15, 98304, 15, 1}).quantization,
                   15.0 * 15 / (132.0 * 16384));
}

TEST(SplitK, SlicesStopAtAFullWaveAndAtTheShortestSlice) {
  const MatmulShapeEfficiency m{128, 128, 132, 384, Duration{}, false, {}, 64};
  // 1024^3: 64 tiles; a third slice would need a second wave, so two slices of 512:
  // 0.97 * 512 / 896 = 0.554 against one slice's 0.485 * 1024 / 1408 = 0.353.
  const GemmTiling cube = gemm_tiling(m, {1024, 1024, 1024, 1});
  EXPECT_EQ(cube.slices, 2);
  EXPECT_DOUBLE_EQ(cube.k_per_slice, 512.0);
  EXPECT_DOUBLE_EQ(cube.quantization, 1024.0 * 1024 * 2 / (132.0 * 16384));
  // k = 100 holds one slice of 64 at most: not split.
  EXPECT_EQ(gemm_tiling(m, {128, 100, 128, 1}).slices, 1);
  // A full wave of tiles is never split.
  EXPECT_EQ(gemm_tiling(m, {1408, 8192, 1536, 1}).slices, 1);
}

TEST(SplitK, TheShortestSliceLimitsTheSplit) {
  const MatmulShapeEfficiency m{128, 128, 132, 384, Duration{}, false, {}, 64};
  // One tile, k = 200: three slices of 66.7 (a fourth would be shorter than 64).
  const GemmTiling t = gemm_tiling(m, {128, 200, 128, 1});
  EXPECT_EQ(t.slices, 3);
  EXPECT_DOUBLE_EQ(t.k_per_slice, 200.0 / 3);
  EXPECT_DOUBLE_EQ(t.quantization, 3.0 / 132);
}

TEST(GemmCalls, PerMatrixLibrariesCallOncePerBatchElement) {
  EXPECT_EQ(gemm_calls({1, 1, 1, 0, Duration{}, true, {}}, {64, 32, 64, 12}), 12);
  EXPECT_EQ(gemm_calls({1, 1, 1, 0, Duration{}, false, {}}, {64, 32, 64, 12}), 1);
}

TEST(ComputeModel, GemmEfficiencyFollowsShape) {
  const RooflineComputeModel model(test_chip());
  // One full wave, k = 64 = k_half: 0.8 * 1 * 64 / 128 = 0.4 of 100 TFLOP/s.
  const ComputeWork w = gemm(1408, 64, 1536);
  EXPECT_DOUBLE_EQ(model.flop_efficiency(w), 0.4);
  const KernelTime t = model.kernel_time(w);
  EXPECT_NEAR(t.flops_bound.seconds(), 2.0 * 1408 * 64 * 1536 / (100e12 * 0.4), 1e-12);
  EXPECT_EQ(t.overhead, Duration::from_ps(5'000'000));  // launch 3 us + one call of 2 us
  // A large k approaches the chip's matmul efficiency.
  EXPECT_NEAR(model.flop_efficiency(gemm(1408, 64 * 1024, 1536)), 0.8 * 1024.0 / 1025.0, 1e-12);
  // Element-wise kernels are not derated and pay no call overhead.
  EXPECT_DOUBLE_EQ(model.flop_efficiency(streaming(MiB(1))), 1.0);
  EXPECT_EQ(model.kernel_time(streaming(MiB(1))).overhead, Duration::from_ps(3'000'000));
}

TEST(ComputeModel, PerMatrixBatchedGemmsPayACallPerMatrix) {
  const RooflineComputeModel model(test_chip("per_matrix"));
  EXPECT_EQ(model.kernel_time(gemm(64, 32, 64, 12)).overhead,
            Duration::from_ps(3'000'000 + 12 * 2'000'000));
}

TEST(ComputeModel, WithoutMatmulShapeEveryGemmGetsTheChipEfficiency) {
  nlohmann::json doc = test_catalogue();
  doc["chips"][kChip]["efficiency"].erase("matmul_shape");
  const RooflineComputeModel model(Catalogue::parse(doc, "t.json").chip(kChip));
  EXPECT_DOUBLE_EQ(model.flop_efficiency(gemm(1409, 64, 1536)), 0.8);
  EXPECT_EQ(model.kernel_time(gemm(1409, 64, 1536)).overhead, Duration::from_ps(3'000'000));
}

TEST(ComputeModel, TrafficThatFitsTheCacheStreamsAtCacheBandwidth) {
  const RooflineComputeModel model(test_chip());
  // 16 MiB fit in 32 MiB: 100 GB/s x 0.5; 64 MiB do not: 10 GB/s x 0.5.
  EXPECT_NEAR(model.kernel_time(streaming(MiB(16))).memory_bound.seconds(),
              16.0 * 1048576 / 50e9, 1e-12);
  EXPECT_NEAR(model.kernel_time(streaming(MiB(64))).memory_bound.seconds(),
              64.0 * 1048576 / 5e9, 1e-12);
  EXPECT_EQ(model.memory_bandwidth(streaming(MiB(32))).value(), 100e9);  // exactly full
  EXPECT_EQ(model.memory_bandwidth(streaming(MiB(32) + Bytes::of(1))).value(), 10e9);
}

// A host copy (activation offloading) moves its bytes over the host link at the catalogue's
// rate in its direction, plus the per-op overhead; it holds no SMs, so collectives in flight do
// not slow it, and HBM's bandwidth and efficiency play no part.
TEST(ComputeModel, HostCopiesRunAtTheHostLinkRate) {
  const Chip h100 = Catalogue::builtin().chip("h100-sxm");
  const RooflineComputeModel model(h100);
  ComputeWork out;
  out.op_class = OpClass::kCopy;
  out.bytes = GiB(2);
  out.host = HostCopy::kToHost;
  ComputeWork back = out;
  back.host = HostCopy::kToDevice;
  const Duration launch = h100.efficiency.launch_overhead;
  EXPECT_EQ(model.kernel_time(out).total(), GiB(2) / h100.host_link->to_host + launch);
  EXPECT_EQ(model.kernel_time(back).total(), GiB(2) / h100.host_link->to_device + launch);
  EXPECT_NE(model.kernel_time(out).total(), model.kernel_time(back).total());  // 52 vs 51 GB/s
  EXPECT_EQ(model.kernel_time(out, ComputeContext{2}).total(), model.kernel_time(out).total());
  ComputeWork on_device = out;
  on_device.host = HostCopy::kNone;  // the same bytes through HBM: far faster
  EXPECT_LT(model.kernel_time(on_device).total() * int64_t{10}, model.kernel_time(out).total());
}

// torchao's float8 linear on the torchao developers' H100 (torchao/float8/README.md,
// "Performance", example 2: forward input 4096 x 8192, weight 8192 x 16384, "benchmark speedup is
// 1.39" over bf16 for forward and backward; torchao/testing/float8/roofline_utils.py gives that
// H100's memory as 2.4 TB/s, "custom to Meta's H100 variant": the Grand Teton part). The float8
// side: three GEMMs (the forward with fast accumulation) and the casts roofline_utils.py lists for
// the tensorwise recipe under torch.compile: the input and the output gradient read once for
// their amax and once more to write both FP8 layouts (2 + 2 + 1 + 1 bytes per element, two kernels
// and a tiny second amax stage), the weight read for its amax and cast once for the forward and
// once for the backward (2 + 3 + 3, three kernels and the stage). The catalogue's rates give the
// measured speedup to within 3 %.
TEST(ComputeModel, Float8LinearSpeedupOnTheGrandTetonH100MatchesTorchaosMeasurement) {
  const RooflineComputeModel model(Catalogue::builtin().chip("h100-sxm-96gb-hbm2e"));
  const int64_t m = 4096;
  const int64_t k = 8192;
  const int64_t n = 16384;
  auto gemm = [&](int64_t rows, int64_t inner, int64_t cols, Dtype dtype, bool fast) {
    ComputeWork w = matmul_work(MatmulShape{rows, inner, cols, 1}, dtype, 2);
    w.fast_accumulation = fast;
    return model.kernel_time(w).total();
  };
  auto pass = [&](int64_t elements, int64_t bytes_per_element) {
    ComputeWork w;
    w.op_class = OpClass::kQuantize;
    w.dtype = Dtype::kFp32;
    w.bytes = Bytes::of(elements * bytes_per_element);
    return model.kernel_time(w).total();
  };
  const Duration bf16 = gemm(m, k, n, Dtype::kBf16, false) + gemm(m, n, k, Dtype::kBf16, false) +
                        gemm(k, m, n, Dtype::kBf16, false);
  const Duration stage = pass(1, 4);  // max_abs stage 2: a launch, no traffic to speak of
  const Duration activation_cast = pass(m * k, 2) + stage + pass(m * k, 4);
  const Duration gradient_cast = pass(m * n, 2) + stage + pass(m * n, 4);
  const Duration weight_cast = pass(k * n, 2) + stage + pass(k * n, 3) + pass(k * n, 3);
  const Duration fp8 = gemm(m, k, n, Dtype::kFp8, true) + gemm(m, n, k, Dtype::kFp8, false) +
                       gemm(k, m, n, Dtype::kFp8, false) + activation_cast + gradient_cast +
                       weight_cast;
  EXPECT_NEAR(bf16 / fp8, 1.39, 0.03 * 1.39);
}

TEST(ChipCatalogue, MatmulShapeAndCacheCarryTheirSources) {
  const Chip chip = test_chip("per_matrix");
  ASSERT_TRUE(chip.efficiency.matmul_shape && chip.cache);
  EXPECT_EQ(chip.efficiency.matmul_shape->units, 132);
  EXPECT_TRUE(chip.efficiency.matmul_shape->per_matrix_calls);
  EXPECT_EQ(chip.cache->capacity, MiB(32));
  for (const char* f : {"/efficiency/matmul_shape/tile_m", "/efficiency/matmul_shape/k_half",
                        "/efficiency/matmul_shape/call_overhead",
                        "/efficiency/matmul_shape/batched", "/cache/capacity",
                        "/cache/bandwidth"}) {
    EXPECT_FALSE(chip.source_of(f).empty()) << f;
  }
}

TEST(ChipCatalogue, BadMatmulShapeOrCacheNamesTheField) {
  const std::string base = "/chips/" + kChip;
  {
    nlohmann::json doc = test_catalogue("sometimes");
    expect_error(capture_input_error([&] { (void)Catalogue::parse(doc, "c.json"); }), "c.json",
                 base + "/efficiency/matmul_shape/batched/value", "one_call");
  }
  {
    nlohmann::json doc = test_catalogue();
    doc["chips"][kChip]["efficiency"]["matmul_shape"]["k_half"]["value"] = -1;
    expect_error(capture_input_error([&] { (void)Catalogue::parse(doc, "c.json"); }), "c.json",
                 base + "/efficiency/matmul_shape/k_half/value", "non-negative");
  }
  {
    nlohmann::json doc = test_catalogue();
    doc["chips"][kChip]["efficiency"]["matmul_shape"]["units"]["value"] = 0;
    expect_error(capture_input_error([&] { (void)Catalogue::parse(doc, "c.json"); }), "c.json",
                 base + "/efficiency/matmul_shape/units/value", "positive");
  }
  {
    nlohmann::json doc = test_catalogue();
    doc["chips"][kChip]["cache"]["capacity"]["value"] = "64GiB";
    expect_error(capture_input_error([&] { (void)Catalogue::parse(doc, "c.json"); }), "c.json",
                 base + "/cache", "smaller than the memory");
  }
  {
    nlohmann::json doc = test_catalogue();
    doc["chips"][kChip]["cache"]["bandwidth"].erase("source");
    expect_error(capture_input_error([&] { (void)Catalogue::parse(doc, "c.json"); }), "c.json",
                 base + "/cache/bandwidth/source", "");
  }
}

}  // namespace
}  // namespace meshsim::topology
