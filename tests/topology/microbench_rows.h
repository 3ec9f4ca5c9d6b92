// The committed component measurements (validation/microbench/*.csv) as kernels of meshsim's
// vocabulary, with their measured times: what tests hold the fitted kernel-class models to.
// Each kernel is built as tools/fit_kernels.py counts it (the FLOP conventions of the sources;
// meshsim's own bytes for the memory-bound kernels).
#pragma once

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "csv_rows.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"
#include "test_files.h"

namespace meshsim::topology::testing {

using meshsim::testing::CsvRow;

inline std::vector<CsvRow> read_csv(const std::string& relative) {
  std::ifstream in(source_path(relative));
  SIM_CHECK(static_cast<bool>(in), "cannot read {}", relative);
  std::stringstream text;
  text << in.rdbuf();
  return meshsim::testing::csv_rows(text.str(), relative);
}

inline int64_t int_of(const CsvRow& r, const std::string& key) { return std::stoll(r.at(key)); }
inline double num_of(const CsvRow& r, const std::string& key) { return std::stod(r.at(key)); }

// A measured kernel: what meshsim costs and the time the source measured.
struct MeasuredKernel {
  std::string chip;
  std::string label;
  std::vector<ComputeWork> work;  // one kernel, or forward then backward for fwd+bwd rows
  Duration measured;
  // The best shape of a brute-force sweep (MAMF): a maximum, which the model must not exceed at
  // its shape, not a typical value of that shape.
  bool best_of_sweep = false;
  // A row of a sweep measured at steady state (Azure's superbench cuBLASLt sweeps: random data
  // after 10,000 warm-up iterations; this project's H200 sweep, run under the power cap after a
  // warm-up: statistic "steady state ..."), to whose training-regime rows tools/fit_kernels.py fits a
  // dtype's e_max where a chip family has them (fit_training_regime).
  bool steady_state_sweep = false;
  // A transformer layer's GEMM of such a sweep (validation/microbench/gpu_sweep.py tags its role in
  // the library column, e.g. "[llama3-8b.qkv.fwd]"; its cubes are "[cube]"): tools/fit_kernels.py
  // chooses the family's k_half on these rows (layer_shape_row).
  bool layer_shape = false;
};

inline Dtype dtype_of(const std::string& name) {
  if (name == "fp8") {
    return Dtype::kFp8;
  }
  return name == "fp16" ? Dtype::kFp16 : Dtype::kBf16;
}

// An FP8 row timed with cuBLASLt's fast accumulation (the library column says so; the H200
// sweep timed its layer shapes both ways): tools/fit_kernels.py fast_accumulation.
inline bool fast_accumulation_row(const CsvRow& r) {
  return r.at("dtype") == "fp8" &&
         r.at("library").find("(e4m3, fast accumulation)") != std::string::npos;
}

// gemm.csv: rows of at least `min_rows` rows (the fit's range: training shapes, not the
// small-batch regime), of the default accumulation or, with `fast_accumulation`, the FP8 rows
// timed with fast accumulation (costed as such: ComputeWork::fast_accumulation).
inline std::vector<MeasuredKernel> gemm_kernels(int64_t min_rows = 256,
                                                bool fast_accumulation = false) {
  std::vector<MeasuredKernel> out;
  for (const CsvRow& r : read_csv("validation/microbench/gemm.csv")) {
    const int64_t m = int_of(r, "m"), n = int_of(r, "n"), k = int_of(r, "k");
    const int64_t b = int_of(r, "batch");
    if (m < min_rows || fast_accumulation_row(r) != fast_accumulation) {
      continue;
    }
    ComputeWork w;
    w.op_class = OpClass::kMatmul;
    w.dtype = dtype_of(r.at("dtype"));
    w.fast_accumulation = fast_accumulation;
    const double flops = 2.0 * static_cast<double>(m * n) * static_cast<double>(k * b);
    w.flops = Flops::of(flops);
    const int64_t in = w.dtype == Dtype::kFp8 ? 1 : 2;
    w.bytes = Bytes::of(b * ((m * k + k * n) * in + m * n * 2));
    w.shape = MatmulShape{m, k, n, b};
    out.push_back({r.at("chip"),
                   r.at("dtype") + " " + r.at("m") + "x" + r.at("n") + "x" + r.at("k"),
                   {w},
                   Seconds(flops / (num_of(r, "tflops") * 1e12)),
                   r.at("statistic").rfind("best shape of a brute-force sweep", 0) == 0,
                   r.at("library") == "cuBLASLt" || r.at("statistic").rfind("steady state", 0) == 0,
                   r.at("library").find('[') != std::string::npos &&
                       r.at("library").find("[cube]") == std::string::npos});
  }
  return out;
}

inline ComputeWork attention_kernel(const CsvRow& r, bool backward) {
  const int64_t b = int_of(r, "batch"), h = int_of(r, "heads_q"), d = int_of(r, "head_dim");
  const int64_t s = int_of(r, "seq");
  const bool causal = r.at("causal") == "true";
  const double fwd = 4.0 * static_cast<double>(b * h) * static_cast<double>(s * s) *
                     static_cast<double>(d) / (causal ? 2.0 : 1.0);
  ComputeWork w;
  w.op_class = OpClass::kAttention;
  w.dtype = Dtype::kBf16;
  w.flops = Flops::of(backward ? 2.5 * fwd : fwd);
  w.shape = MatmulShape{s, d, s, b * h};
  const std::optional<AttentionImpl> impl = parse_enum<AttentionImpl>(r.at("impl"));
  SIM_CHECK(impl.has_value(), "attention.csv: unknown implementation {}", r.at("impl"));
  w.attention = AttentionShape{*impl, backward, causal, b * h, s, s, d};
  return w;
}

// Implementations attention.csv keeps for reference that meshsim does not model, as
// tools/fit_kernels.py's UNMODELLED_ATTENTION: openai-triton, the "FlashAttention Triton" series
// of the FlashAttention-2 paper's A100 figure (OpenAI's triton.ops.flash_attention, not the
// flash_attn_triton.py port that meshsim's triton is).
inline bool unmodelled_attention(const std::string& impl) {
  if (impl != "openai-triton") {
    return false;
  }
  SIM_CHECK(!parse_enum<AttentionImpl>(impl).has_value(),
            "attention.csv: {} is modelled now; fit and test its rows", impl);
  return true;
}

// attention.csv: forward, backward, or both kernels of a fwd+bwd row.
inline std::vector<MeasuredKernel> attention_kernels() {
  std::vector<MeasuredKernel> out;
  for (const CsvRow& r : read_csv("validation/microbench/attention.csv")) {
    if (unmodelled_attention(r.at("impl"))) {
      continue;
    }
    const std::string pass = r.at("pass");
    std::vector<ComputeWork> work;
    if (pass != "bwd") {
      work.push_back(attention_kernel(r, false));
    }
    if (pass != "fwd") {
      work.push_back(attention_kernel(r, true));
    }
    double flops = 0;
    for (const ComputeWork& w : work) {
      flops += w.flops.count();
    }
    out.push_back({r.at("chip"),
                   r.at("impl") + " " + pass + (r.at("causal") == "true" ? " causal" : "") + " d" +
                       r.at("head_dim") + " s" + r.at("seq"),
                   work, Seconds(flops / (num_of(r, "tflops") * 1e12))});
  }
  return out;
}

// memory_bound.csv: the fused kernels (Liger-Kernel, cuDNN, Megatron's fused cross entropy,
// PyTorch's own fused norms) and the FP8 casts, with meshsim's bytes for each (workloads/src/layer_ops.cc).
inline std::vector<MeasuredKernel> memory_kernels() {
  std::vector<MeasuredKernel> out;
  for (const CsvRow& r : read_csv("validation/microbench/memory_bound.csv")) {
    const std::string op = r.at("op");
    const std::string provider = r.at("provider");
    const bool fused = provider == "liger" || provider == "cudnn" || provider == "megatron-fused" ||
                       provider == "torch-fused";
    if (r.at("time_us").empty() || (!fused && op != "fp8_cast")) {
      continue;
    }
    const int64_t t = int_of(r, "rows"), wd = int_of(r, "width");
    const int64_t e = r.at("dtype") == "fp32" ? 4 : 2;
    ComputeWork w;
    w.dtype = Dtype::kFp32;
    int64_t bytes = 0;
    std::vector<int64_t> more;  // the bytes of the implementation's further kernels
    if (op == "rms_norm" || op == "layer_norm") {
      w.op_class = OpClass::kNorm;
      bytes = 2 * e * t * wd + e * wd;
    } else if (op == "swiglu") {
      w.op_class = OpClass::kElementwise;
      bytes = 3 * e * t * (wd / 2);
    } else if (op == "relu_squared" || op == "rope") {
      w.op_class = OpClass::kElementwise;
      bytes = 2 * e * t * wd;
    } else if (op == "cross_entropy" && provider == "megatron-fused") {
      // Megatron-Core's fused loss, forward (FusedCrossEntropy::kMegatronCore, layer_ops.cc):
      // element-wise and reduction kernels, at that class's rate.
      w.op_class = OpClass::kLoss;
      w.rate_class = OpClass::kElementwise;
      bytes = (e + 4) * t * wd;
      more = {8 * t * wd, 8 * t * wd};
    } else if (op == "cross_entropy") {
      w.op_class = OpClass::kLoss;
      bytes = 2 * e * t * wd;
    } else if (op == "fp8_cast") {
      w.op_class = OpClass::kQuantize;
      bytes = 3 * t * wd;
    } else {
      continue;
    }
    w.bytes = Bytes::of(bytes);
    std::vector<ComputeWork> kernels{w};
    for (const int64_t b : more) {
      w.bytes = Bytes::of(b);
      kernels.push_back(w);
    }
    out.push_back({r.at("chip"), op + " " + provider + " " + r.at("rows") + "x" + r.at("width"),
                   std::move(kernels), Microseconds(num_of(r, "time_us"))});
  }
  return out;
}

}  // namespace meshsim::topology::testing
