// The kernel-class cost model (compute_model.h) with the catalogue's fitted parameters, held to the
// component measurements it was fitted to (validation/microbench/, tools/fit_kernels.py): per
// chip and table, the median and the largest relative error of the model's kernel time against
// the measured one stay within the stated tolerances (set from the fit, with headroom; never
// loosened to let a change pass). Also: the FP8 speedup of a GEMM by shape, interference slowing
// an overlapped GEMM by the cited fraction, the attention class by implementation.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "meshsim/topology/chip.h"
#include "meshsim/topology/compute_model.h"
#include "microbench_rows.h"

namespace meshsim::topology {
namespace {

using testing::MeasuredKernel;

struct Tolerance {
  double median;  // of |model / measured - 1|
  double max;
};

// Per table and chip: the fit's errors (tools/fit_kernels.py, validation/microbench/README.md)
// rounded up with a little headroom. GEMM on H200 and GB200: the largest FP8 error of the public
// rows is the MAMF maximum (the best shape of a sweep), which the FP8 model, fitted to the sweeps'
// training-regime rows, runs 35% (H200) and 29% (GB200) slower than: a ceiling it stays under
// (GemmModelStaysUnderTheBestOfSweepMaxima), not a typical value of its shape. H200's largest
// errors over all its rows are the 256-1024 cubes of this project's sweep (2.8-5.6 us kernels that
// cuBLAS runs at 12-384 TFLOP/s, 0.9-1.2x slower in the wave model: far from any layer of a
// training step), which is why GemmsOfLayerShapesHoldToTheH200Sweep holds the layer shapes apart.
// H100's largest is the 2023 M = 2048 sweep at K = 1024 (40% faster in the model). B200's table
// holds no training-regime FP8 row (small-M vLLM CUTLASS rows and a MAMF maximum): its FP8 model
// is the Blackwell family's training-regime fit (from GB200's sweep), 9-33% slower than those rows.
// GEMM on A100: its 16-bit e_max is fitted to the training-regime rows of its sweep, and the
// largest errors are the 1k and 2k cubes (24% and 22% slower in the model: cuBLASLt's stream-K
// kernels beat the wave model there), square shapes far smaller than a training step's layers.
// Attention on H200: its largest errors are FlashAttention-2's causal forward at 1024 tokens (17%
// slower in the model) and at 512 (13% faster): the measured rate jumps from 136 to 248 TFLOP/s
// between the two, which e_inf * s / (s + s_half) cannot follow.
const std::map<std::string, std::map<std::string, Tolerance>> kTolerances = {
    {"gemm",
     {{"a100-80gb", {0.09, 0.25}},
      {"h100-sxm", {0.06, 0.42}},
      {"h200", {0.04, 1.26}},
      {"b200", {0.21, 0.34}},
      {"gb200", {0.11, 0.30}},
      {"tpu-v5e", {0.02, 0.03}},
      // v6e: three device-timed products of two sources whose 8192^3 rates differ by 14%.
      {"tpu-v6e", {0.06, 0.11}}}},
    {"attention",
     {{"a100-80gb", {0.02, 0.03}},
      {"h100-sxm", {0.04, 0.10}},
      {"h200", {0.04, 0.17}},
      {"b200", {0.10, 0.70}},
      {"gb200", {0.05, 0.11}},
      // Host-timed rows (axlearn's benchmark: 5 calls, 0.1 ms resolution) whose rate rises with
      // the head count, one efficiency per pass (validation/microbench/README.md).
      {"tpu-v5p", {0.10, 0.23}}}},
    // FlashAttention's Triton port: on A100 and H100 the FlashAttention-1 CUDA series that
    // stands in for it (chips.json says why; attention.csv's openai-triton rows are not read).
    {"attention-triton", {{"a100-80gb", {0.04, 0.08}}, {"h100-sxm", {0.04, 0.11}}}},
    // H200's norms: cuDNN's kernels and PyTorch's fused ones (0.55-0.70 of HBM against up to
    // 0.85) share one efficiency.
    {"memory",
     {{"a100-80gb", {0.06, 0.25}},
      {"h100-sxm", {0.20, 0.55}},
      {"h200", {0.11, 0.36}},
      {"gb200", {0.10, 0.23}}}},
};

double model_seconds(const RooflineComputeModel& m, const MeasuredKernel& k) {
  Duration t;
  for (const ComputeWork& w : k.work) {
    t += m.kernel_time(w).total();
  }
  return t.seconds();
}

double median_of_sorted(const std::vector<double>& e) {
  return e.size() % 2 == 1 ? e[e.size() / 2] : 0.5 * (e[e.size() / 2 - 1] + e[e.size() / 2]);
}

// The model's errors (model / measured - 1) over a set of kernels on one chip.
struct ErrorSummary {
  size_t rows = 0;
  double median_signed = 0;
  double median = 0;   // of |error|
  double largest = 0;  // |error|
};

ErrorSummary error_summary(const RooflineComputeModel& model,
                           const std::vector<MeasuredKernel>& kernels) {
  std::vector<double> signed_errors;
  std::vector<double> errors;
  for (const MeasuredKernel& k : kernels) {
    const double e = model_seconds(model, k) / k.measured.seconds() - 1.0;
    signed_errors.push_back(e);
    errors.push_back(std::fabs(e));
  }
  if (errors.empty()) {
    return {};
  }
  std::sort(signed_errors.begin(), signed_errors.end());
  std::sort(errors.begin(), errors.end());
  return {errors.size(), median_of_sorted(signed_errors), median_of_sorted(errors), errors.back()};
}

void check_table(const std::string& table, const std::vector<MeasuredKernel>& kernels) {
  const Catalogue cat = Catalogue::builtin();
  std::map<std::string, std::vector<double>> errors;
  for (const MeasuredKernel& k : kernels) {
    const RooflineComputeModel model(cat.chip(k.chip));
    const double e = model_seconds(model, k) / k.measured.seconds() - 1.0;
    errors[k.chip].push_back(std::fabs(e));
  }
  for (const auto& [chip, tol] : kTolerances.at(table)) {
    SCOPED_TRACE(table + " " + chip);
    std::vector<double> e = errors[chip];
    ASSERT_FALSE(e.empty()) << "no rows";
    std::sort(e.begin(), e.end());
    const double median = median_of_sorted(e);
    EXPECT_LE(median, tol.median) << e.size() << " rows";
    EXPECT_LE(e.back(), tol.max) << e.size() << " rows";
    ::testing::Test::RecordProperty(table + "." + chip,
                                    fmt::format("median {:.3f} max {:.3f}", median, e.back()));
  }
}

std::vector<MeasuredKernel> gemm_rows(bool best_of_sweep) {
  std::vector<MeasuredKernel> out;
  for (MeasuredKernel& k : testing::gemm_kernels()) {
    if (k.best_of_sweep == best_of_sweep) {
      out.push_back(std::move(k));
    }
  }
  return out;
}

TEST(KernelFit, GemmModelHoldsToTheGemmTable) { check_table("gemm", testing::gemm_kernels()); }

// The MAMF maxima are the fastest shape of a brute-force sweep: the model is never faster there,
// in any dtype (tools/fit_kernels.py considers no e_max that is). FP8, fitted to the sweeps'
// training-regime rows, is slower there (its wave quantization is coarser than cuBLAS's stream-K
// kernels); 16-bit B200, fitted to small-M vLLM rows, would run 13% above its maximum without
// the ceiling.
TEST(KernelFit, GemmModelStaysUnderTheBestOfSweepMaxima) {
  const Catalogue cat = Catalogue::builtin();
  std::map<Dtype, int> checked;
  for (const MeasuredKernel& k : gemm_rows(true)) {
    if (!cat.contains(k.chip)) {
      continue;
    }
    ++checked[k.work.front().dtype];
    const RooflineComputeModel model(cat.chip(k.chip));
    EXPECT_GE(model_seconds(model, k), k.measured.seconds()) << k.chip << " " << k.label;
  }
  EXPECT_EQ(checked[Dtype::kFp8], 4);   // H100, H200, B200, GB200
  EXPECT_EQ(checked[Dtype::kBf16], 4);  // A100, H100, B200, GB200
}

// Where a chip family has steady-state sweep rows in the training regime (M, N, K >= 4096: Azure's
// cuBLASLt sweeps, this project's H200 sweep), a dtype's e_max is fitted to them alone
// (tools/fit_kernels.py fit_training_regime): there the model holds to 2.2% median, 6% at most
// for FP8 on Hopper (Azure's cubes and 6144x12288x12288 on H100 and H200, the H200 sweep's layer
// shapes); to 3.1% median, 19% at most for 16-bit on Hopper (the H200 sweep; the largest is
// 16384x4096x14336, the slowest shape it timed); and to 3.3% at most for 16-bit on A100 (4096^3
// to 16384^3 and 6144x12288x12288). The dtype group is the fit's: FP8, or the 16-bit dtypes
// together.
std::vector<double> training_regime_errors(const std::vector<std::string>& chips, bool fp8) {
  const Catalogue cat = Catalogue::builtin();
  std::vector<double> errors;
  for (const MeasuredKernel& k : gemm_rows(false)) {
    const MatmulShape& s = *k.work.front().shape;
    if (std::find(chips.begin(), chips.end(), k.chip) == chips.end() ||
        (k.work.front().dtype == Dtype::kFp8) != fp8 || !k.steady_state_sweep ||
        std::min({s.m, s.n, s.k}) < 4096) {
      continue;
    }
    const RooflineComputeModel model(cat.chip(k.chip));
    errors.push_back(std::fabs(model_seconds(model, k) / k.measured.seconds() - 1.0));
  }
  std::sort(errors.begin(), errors.end());
  return errors;
}

TEST(KernelFit, GemmsOfTrainingShapesHoldToTheSteadyStateSweeps) {
  const std::vector<double> fp8 = training_regime_errors({"h100-sxm", "h200"}, true);
  ASSERT_EQ(fp8.size(), 40U);
  EXPECT_LE(median_of_sorted(fp8), 0.025);
  EXPECT_LE(fp8.back(), 0.07);
  const std::vector<double> hopper16 = training_regime_errors({"h100-sxm", "h200"}, false);
  ASSERT_EQ(hopper16.size(), 30U);
  EXPECT_LE(median_of_sorted(hopper16), 0.035);
  EXPECT_LE(hopper16.back(), 0.19);
  const std::vector<double> a100 = training_regime_errors({"a100-80gb"}, false);
  ASSERT_EQ(a100.size(), 4U);
  EXPECT_LE(median_of_sorted(a100), 0.02);
  EXPECT_LE(a100.back(), 0.04);
}

// The GEMMs a training step runs, measured on an H200 under its power cap (this project's sweep,
// validation/microbench/h200-2026-11-28: the projection and MLP shapes of Llama-3 8B, Llama-3 70B
// at TP 8 and GPT-3 175B at TP 8 at 2048-16384 tokens, forward, dgrad and wgrad; 45 per dtype):
// the model is unbiased there (median signed error within 3%) and typically within 4% (bf16) and
// 3% (FP8). Its largest errors are the Llama-3 70B QKV projection at 2048 tokens (N 1280: 80 tiles
// of 128 x 256 on 132 SMs, one short wave, where the model's one-tile-per-SM waves leave 40% of the
// SMs idle; cuBLAS ran it 43% (bf16) and 50% (FP8) faster than that, with kernels the model does not
// describe) and 16384x4096x14336 (measured 19% slower than the model).
TEST(KernelFit, GemmsOfLayerShapesHoldToTheH200Sweep) {
  const Catalogue cat = Catalogue::builtin();
  const RooflineComputeModel model(cat.chip("h200"));
  for (const bool fp8 : {false, true}) {
    SCOPED_TRACE(fp8 ? "fp8" : "bf16");
    std::vector<MeasuredKernel> shapes;
    for (MeasuredKernel& k : gemm_rows(false)) {
      if (k.chip == "h200" && k.steady_state_sweep && k.layer_shape &&
          (k.work.front().dtype == Dtype::kFp8) == fp8) {
        shapes.push_back(std::move(k));
      }
    }
    const ErrorSummary e = error_summary(model, shapes);
    ASSERT_EQ(e.rows, 45U);
    EXPECT_LE(std::fabs(e.median_signed), 0.03);
    EXPECT_LE(e.median, fp8 ? 0.03 : 0.04);
    EXPECT_LE(e.largest, fp8 ? 0.50 : 0.44);
  }
}

// FP8 GEMMs with fast accumulation, as Transformer Engine's recipes and torchao's float8 run the
// forward GEMMs: the H200 sweep timed its 45 layer shapes both ways in the same runs, and fast
// accumulation was a median 7.9% faster (from 1% slower to 27% faster by shape). The catalogue's
// matmul_fp8_fast_accum_speedup must be that median, and the fast rows hold to the model about
// as the default ones do: median signed error -1.2% (within 3%), median 3.7% (3% without fast
// accumulation); the largest, 53%, is the Llama-3 70B QKV projection at 2048 tokens, 50% without
// (the short wave the model does not describe).
TEST(KernelFit, Fp8FastAccumulationHoldsToTheH200Sweep) {
  const Catalogue cat = Catalogue::builtin();
  const Chip& h200 = cat.chip("h200");
  ASSERT_TRUE(h200.efficiency.matmul_fp8_fast_accum_speedup.has_value());
  const RooflineComputeModel model(h200);
  std::map<std::string, double> plain;  // label -> measured seconds
  for (const MeasuredKernel& k : gemm_rows(false)) {
    if (k.chip == "h200" && k.layer_shape && k.work.front().dtype == Dtype::kFp8) {
      plain[k.label] = k.measured.seconds();
    }
  }
  std::vector<double> speedups;
  std::vector<MeasuredKernel> fast;
  for (MeasuredKernel& k : testing::gemm_kernels(256, true)) {
    if (k.chip != "h200" || !k.layer_shape) {
      continue;
    }
    ASSERT_TRUE(k.work.front().fast_accumulation);
    ASSERT_TRUE(plain.contains(k.label)) << k.label;
    speedups.push_back(plain.at(k.label) / k.measured.seconds());
    fast.push_back(std::move(k));
  }
  ASSERT_EQ(speedups.size(), 45U);
  std::sort(speedups.begin(), speedups.end());
  const double modelled =
      h200.efficiency.matmul_fp8_for(true) / h200.efficiency.matmul_fp8_for(false);
  EXPECT_NEAR(modelled, median_of_sorted(speedups), 0.01);
  EXPECT_GT(median_of_sorted(speedups), 1.03);  // a real effect, not noise around 1
  const ErrorSummary e = error_summary(model, fast);
  EXPECT_LE(std::fabs(e.median_signed), 0.03);
  EXPECT_LE(e.median, 0.04);
  EXPECT_LE(e.largest, 0.55);
}

TEST(KernelFit, AttentionModelHoldsToTheAttentionTable) {
  std::vector<MeasuredKernel> fused;
  std::vector<MeasuredKernel> triton;
  for (MeasuredKernel& k : testing::attention_kernels()) {
    const bool is_triton = k.work.front().attention->impl == AttentionImpl::kTriton;
    (is_triton ? triton : fused).push_back(std::move(k));
  }
  check_table("attention", fused);
  check_table("attention-triton", triton);
}

TEST(KernelFit, MemoryBoundModelHoldsToTheMemoryTable) {
  check_table("memory", testing::memory_kernels());
}

ComputeWork gemm(int64_t m, int64_t n, int64_t k, Dtype dtype) {
  ComputeWork w;
  w.op_class = OpClass::kMatmul;
  w.dtype = dtype;
  w.flops =
      Flops::of(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k));
  const int64_t in = dtype == Dtype::kFp8 ? 1 : 2;
  w.bytes = Bytes::of((m * k + k * n) * in + m * n * 2);
  w.shape = MatmulShape{m, k, n, 1};
  return w;
}

// B200 and GB200 are the same die; GB200 runs at 1200 W against B200's 1000 W and its datasheet
// peaks are 11% higher. At the shapes of a transformer layer the model never makes B200 the
// faster one, in BF16 or FP8 (fitted to B200's own small-M rows alone, its FP8 e_max put it at
// 3339 TFLOP/s, above GB200's measured 2877-2907 plateau).
TEST(KernelFit, B200IsNeverFasterThanGb200AtLayerShapes) {
  const Catalogue cat = Catalogue::builtin();
  const RooflineComputeModel b200(cat.chip("b200"));
  const RooflineComputeModel gb200(cat.chip("gb200"));
  for (const Dtype d : {Dtype::kBf16, Dtype::kFp8}) {
    for (const int64_t m : {4096, 16384, 65536}) {
      for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{
               {6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}, {128256, 4096}}) {
        const ComputeWork w = gemm(m, n, k, d);
        EXPECT_GE(b200.kernel_time(w).total(), gb200.kernel_time(w).total())
            << to_string(d) << " " << m << "x" << n << "x" << k;
      }
    }
  }
}

double fp8_speedup(const RooflineComputeModel& m, int64_t rows, int64_t n, int64_t k) {
  return m.kernel_time(gemm(rows, n, k, Dtype::kBf16)).total() /
         m.kernel_time(gemm(rows, n, k, Dtype::kFp8)).total();
}

// Transformer Engine's gemm_profiling (validation/microbench/fp8.csv): the four linear GEMMs of a
// 5B-model layer (M 15872; QKV 4096->12288, output 4096->4096, up 4096->16384, down 16384->4096)
// run 1.90x faster in FP8 (current scaling, pre-quantized: GEMM kernels alone) than in BF16 on an
// H200 NVL; the model, on the H200 SXM's fits, within 10%. A small GEMM gains less (launch and
// the small grid dominate), a large square one approaches the ratio of the FP8 and BF16 rates.
TEST(KernelFit, Fp8SpeedupOfAGemmDependsOnItsShape) {
  const Catalogue cat = Catalogue::builtin();
  const RooflineComputeModel h200(cat.chip("h200"));
  const std::vector<std::array<int64_t, 3>> layer = {
      {15872, 12288, 4096}, {15872, 4096, 4096}, {15872, 16384, 4096}, {15872, 4096, 16384}};
  Duration bf16, fp8;
  for (const auto& [m, n, k] : layer) {
    bf16 += h200.kernel_time(gemm(m, n, k, Dtype::kBf16)).total();
    fp8 += h200.kernel_time(gemm(m, n, k, Dtype::kFp8)).total();
  }
  EXPECT_NEAR(bf16 / fp8, 1.90, 0.19);
  const RooflineComputeModel h100(cat.chip("h100-sxm"));
  const double small = fp8_speedup(h100, 1024, 1024, 1024);
  const double large = fp8_speedup(h100, 16384, 16384, 16384);
  EXPECT_LT(small, large);
  EXPECT_LT(small, 1.6);
  const Chip& c = cat.chip("h100-sxm");
  const double rates = c.peak(Dtype::kFp8)->value() * *c.efficiency.matmul_fp8 /
                       (c.peak(Dtype::kBf16)->value() * c.efficiency.matmul);
  EXPECT_NEAR(large, rates, 0.02 * rates);
}

// While a collective is in flight its kernels hold comm_units SMs (H100: 24, the measured grid of
// an ncclAllGather): a GEMM of many waves then runs on 108 of 132 SMs, 132/108 - 1 = 22% slower
// (Lee et al. 2025 measured 18.9% on average, 40% at most, for overlapped compute); a GEMM of
// exactly one wave of 132 tiles needs a second wave, 2x slower (the NVIDIA forum's observation:
// MFU 80% -> 47%). Two collectives hold twice the SMs. Memory-bound kernels are not slowed.
TEST(KernelFit, InterferenceSlowsAnOverlappedGemmByTheCitedFraction) {
  const Catalogue cat = Catalogue::builtin();
  const Chip& chip = cat.chip("h100-sxm");
  ASSERT_EQ(chip.efficiency.comm_units, 24);
  const RooflineComputeModel m(chip);
  const ComputeContext one{1};
  const ComputeContext two{2};
  // 32768 x 16384 with 128 x 256 tiles: 4096 tiles, 32 waves on 132 SMs, 38 on 108.
  const ComputeWork big = gemm(32768, 16384, 8192, Dtype::kBf16);
  const double slow = m.kernel_time(big, one).flops_bound / m.kernel_time(big).flops_bound;
  EXPECT_NEAR(slow, 132.0 / 108.0, 0.03);
  EXPECT_GT(m.kernel_time(big, two).flops_bound, m.kernel_time(big, one).flops_bound);
  // 11 x 12 tiles of 128 x 128 (the best tile here): one wave alone, two beside a collective.
  const ComputeWork one_wave = gemm(1408, 1536, 8192, Dtype::kBf16);
  EXPECT_NEAR(m.kernel_time(one_wave, one).flops_bound / m.kernel_time(one_wave).flops_bound, 2.0,
              1e-6);
  ComputeWork copy;
  copy.op_class = OpClass::kCopy;
  copy.dtype = Dtype::kFp32;
  copy.bytes = GiB(1);
  EXPECT_EQ(m.kernel_time(copy, one).total(), m.kernel_time(copy).total());
  // The engine's seam: compute_time_in with the context, compute_time without.
  EXPECT_EQ(m.compute_time_in(RankId(0), big, {}), m.compute_time(RankId(0), big));
  EXPECT_GT(m.compute_time_in(RankId(0), big, one), m.compute_time(RankId(0), big));
}

// The interference model against a measurement: this project's H200 sweep timed twelve 8192^3
// bf16 GEMMs (one CUDA graph) alone and beside a copy kernel that holds P SMs throughout (a
// Triton grid-stride copy of P CTAs of 512 threads streaming 256 MiB, started first: the way
// NCCL's kernels hold one SM per channel), three times per P in each of two runs
// (validation/microbench/h200-2026-11-28/run*/misc.json, "interference"). The model recounts the
// GEMM's waves on the SMs left. Measured against modelled: P 8: 6.6% / 6.2%; 16: 17.6% / 12.5%;
// 24 (NCCL's channels on H100): 18.4% / 18.7%; 32: 28.6% / 31.3%. At 66 (half the chip) the model
// over-predicts (100% against 82%): the copy's CTAs share their SMs with the GEMM's there, which the
// model does not have; no NCCL collective runs on that many channels.
TEST(KernelFit, InterferenceMatchesTheMeasuredSlowdownBesideAKernelHoldingSms) {
  const Catalogue cat = Catalogue::builtin();
  std::map<int64_t, std::vector<double>> measured;
  for (const char* run : {"run1", "run2"}) {
    const std::string path = MESHSIM_SOURCE_DIR "/validation/microbench/h200-2026-11-28/";
    std::ifstream in(path + run + "/misc.json");
    ASSERT_TRUE(in) << path << run;
    const nlohmann::json misc = nlohmann::json::parse(in);
    ASSERT_EQ(misc.at("interference").at("gemm").get<std::string>(),
              "8192^3 bf16 torch.mm x 12 in a CUDA graph");
    for (const nlohmann::json& row : misc.at("interference").at("rows")) {
      measured[row.at("ctas").get<int64_t>()].push_back(row.at("gemm_slowdown").get<double>());
    }
  }
  ASSERT_EQ(measured.size(), 5U);
  const ComputeWork big = gemm(8192, 8192, 8192, Dtype::kBf16);
  for (const auto& [ctas, runs] : measured) {
    SCOPED_TRACE(fmt::format("{} SMs held", ctas));
    ASSERT_EQ(runs.size(), 2U);
    Chip chip = cat.chip("h200");
    chip.efficiency.comm_units = ctas;
    const RooflineComputeModel m(chip);
    const double model = m.kernel_time(big, ComputeContext{1}).flops_bound /
                             m.kernel_time(big).flops_bound -
                         1.0;
    const double mean = 0.5 * (runs[0] + runs[1]);
    if (ctas <= 32) {
      EXPECT_NEAR(model, mean, ctas == 24 ? 0.02 : 0.06);
    } else {
      EXPECT_GT(model, mean);  // half the chip held: the model's bound is pessimistic
      EXPECT_LT(model, 1.3 * mean);
    }
  }
}

ComputeWork attention(AttentionImpl impl, bool backward, int64_t seq) {
  ComputeWork w;
  w.op_class = OpClass::kAttention;
  w.dtype = Dtype::kBf16;
  const int64_t bh = 16 * (16384 / seq);  // 16 heads, 16k tokens
  w.flops = Flops::of((backward ? 2.5 : 1.0) * 2.0 * static_cast<double>(bh) *
                      static_cast<double>(seq * seq) * 128.0);
  w.shape = MatmulShape{seq, 128, seq, bh};
  w.attention = AttentionShape{impl, backward, true, bh, seq, seq, 128};
  return w;
}

// Attention is a class of its own: on H100, cuDNN's fused attention and FlashAttention-3 run
// at about twice FlashAttention-2's rate (FA3 paper, figures 5-6), efficiency rises with the
// sequence, and none reaches the GEMM model's efficiency.
TEST(KernelFit, AttentionIsCostedByImplementation) {
  const Catalogue cat = Catalogue::builtin();
  const Chip& chip = cat.chip("h100-sxm");
  const RooflineComputeModel m(chip);
  const auto eff = [&](AttentionImpl impl, bool bwd, int64_t s) {
    return m.flop_efficiency(attention(impl, bwd, s));
  };
  for (const bool bwd : {false, true}) {
    EXPECT_GT(eff(AttentionImpl::kCudnn, bwd, 8192), 1.4 * eff(AttentionImpl::kFlash2, bwd, 8192));
    EXPECT_GT(eff(AttentionImpl::kFlash3, bwd, 8192), 1.4 * eff(AttentionImpl::kFlash2, bwd, 8192));
    EXPECT_GT(eff(AttentionImpl::kCudnn, bwd, 16384), eff(AttentionImpl::kCudnn, bwd, 1024));
    EXPECT_LT(eff(AttentionImpl::kFlash3, bwd, 16384), chip.efficiency.matmul);
  }
  // FlashAttention-2 at 8k, forward, causal, d 128: the fit e_inf 0.356, s_half 400, times the
  // waves of its 2 x 16 x 64 = 2048 query blocks on 132 SMs (16 waves).
  EXPECT_NEAR(eff(AttentionImpl::kFlash2, false, 8192),
              0.356 * 8192 / (8192 + 400.0) * 2048 / (16 * 132.0), 1e-9);
  // The chip lists what it has measurements of.
  EXPECT_EQ(chip.attention_impls(),
            (std::vector<AttentionImpl>{AttentionImpl::kFlash2, AttentionImpl::kFlash3,
                                        AttentionImpl::kCudnn, AttentionImpl::kTriton}));
  // FlashAttention's Triton port (the FlashAttention-1 algorithm) at less than half of
  // FlashAttention-2's rate on long sequences, as measured.
  EXPECT_LT(eff(AttentionImpl::kTriton, false, 16384),
            0.5 * eff(AttentionImpl::kFlash2, false, 16384));
}

// TPU: JAX's Pallas flash attention is costed from its measurements on v5p (axlearn's benchmark),
// at well under half the MXU model's efficiency for the same products; v5e and v4 take v5p's fits
// (the same TensorCore); a TPU without them (v6e's larger MXUs) costs the kernel as its P V GEMM.
TEST(KernelFit, TpuAttentionIsCostedFromTheV5pMeasurements) {
  const Catalogue cat = Catalogue::builtin();
  const ComputeWork fwd = attention(AttentionImpl::kSplash, false, 2048);
  const ComputeWork bwd = attention(AttentionImpl::kSplash, true, 2048);
  ComputeWork pv = fwd;
  pv.attention.reset();
  pv.shape = MatmulShape{2048, 2048, 128, fwd.attention->batch_heads};  // P V: keys reduced
  const RooflineComputeModel v5p(cat.chip("tpu-v5p"));
  // 2048 tokens in 512-token blocks: the causal kernel computes 5/8 of the square, e_inf * 4/5.
  EXPECT_NEAR(v5p.flop_efficiency(fwd), 0.298 * 2048 / (2048 + 512.0), 1e-9);
  EXPECT_NEAR(v5p.flop_efficiency(bwd), 0.384 * 2048 / (2048 + 512.0), 1e-9);
  EXPECT_LT(v5p.flop_efficiency(fwd), 0.5 * v5p.flop_efficiency(pv));
  EXPECT_EQ(cat.chip("tpu-v5e").attention_impls(), cat.chip("tpu-v5p").attention_impls());
  for (const char* chip : {"tpu-v4", "tpu-v5e"}) {
    EXPECT_EQ(RooflineComputeModel(cat.chip(chip)).flop_efficiency(bwd), v5p.flop_efficiency(bwd))
        << chip;
  }
  const RooflineComputeModel v6e(cat.chip("tpu-v6e"));
  EXPECT_EQ(v6e.kernel_time(fwd).total(), v6e.kernel_time(pv).total());
}

}  // namespace
}  // namespace meshsim::topology
