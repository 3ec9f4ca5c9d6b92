#include "meshsim/workloads/analytic.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "meshsim/sim/error.h"

namespace meshsim::workloads {

namespace {

double to_d(int64_t v) { return static_cast<double>(v); }

Flops matmul_flops(int64_t m, int64_t k, int64_t n) {
  SIM_CHECK(m > 0 && k > 0 && n > 0, "matmul shape {}x{}x{} is not positive", m, k, n);
  return Flops::of(2.0 * to_d(m) * to_d(k) * to_d(n));
}

FlopsPerSec effective_rate(int64_t devices, FlopsPerSec peak, double mfu) {
  SIM_CHECK(devices > 0 && peak.value() > 0.0 && mfu > 0.0 && mfu <= 1.0,
            "training on {} devices of {} FLOP/s at MFU {}", devices, peak.value(), mfu);
  return peak * (to_d(devices) * mfu);
}

}  // namespace

double matmul_arithmetic_intensity(int64_t m, int64_t k, int64_t n, int64_t bytes_per_element) {
  SIM_CHECK(bytes_per_element > 0, "{} bytes per element", bytes_per_element);
  const double elements = to_d(m) * to_d(k) + to_d(k) * to_d(n) + to_d(m) * to_d(n);
  return matmul_flops(m, k, n).count() / (elements * to_d(bytes_per_element));
}

double elementwise_arithmetic_intensity(double flops_per_element, int64_t bytes_per_element,
                                        int64_t reads, int64_t writes) {
  SIM_CHECK(bytes_per_element > 0 && reads >= 0 && writes >= 0 && reads + writes > 0,
            "{} bytes per element, {} reads, {} writes", bytes_per_element, reads, writes);
  return flops_per_element / (to_d(reads + writes) * to_d(bytes_per_element));
}

Duration matmul_time_compute_bound(int64_t m, int64_t k, int64_t n, FlopsPerSec peak) {
  return matmul_flops(m, k, n) / peak;
}

Bytes elementwise_traffic(const std::vector<int64_t>& shape, int64_t bytes_per_element,
                          int64_t reads, int64_t writes) {
  int64_t elements = 1;
  for (const int64_t d : shape) {
    SIM_CHECK(d >= 0, "negative dimension {}", d);
    elements *= d;
  }
  return Bytes::of(elements * bytes_per_element * (reads + writes));
}

Duration memory_bound_time(Bytes traffic, BytesPerSec bandwidth) { return traffic / bandwidth; }

int64_t max_params_in_memory(Bytes memory, int64_t bytes_per_param) {
  SIM_CHECK(bytes_per_param > 0, "{} bytes per parameter", bytes_per_param);
  return memory.count() / bytes_per_param;
}

double model_flops_utilization(double tokens_per_second_per_device, Flops flops_per_token,
                               FlopsPerSec peak) {
  SIM_CHECK(peak.value() > 0.0 && tokens_per_second_per_device >= 0.0,
            "MFU of {} tokens/s at a peak of {} FLOP/s", tokens_per_second_per_device,
            peak.value());
  const double achieved = tokens_per_second_per_device * flops_per_token.count();
  const double ratio = achieved / peak.value();
  if (ratio > 1.0) {
    throw InfeasibleError(fmt::format(
        "impossible MFU: {} tokens/s per device x {:.4g} FLOP per token needs {:.4g} FLOP/s, "
        "which exceeds the device's peak of {:.4g} FLOP/s by a ratio of {:.3f} (MFU cannot "
        "exceed 1; check the throughput or the FLOPs-per-token convention)",
        tokens_per_second_per_device, flops_per_token.count(), achieved, peak.value(), ratio));
  }
  return ratio;
}

Bytes fsdp_model_state_bytes_per_device(int64_t params, int64_t bytes_per_param, int64_t devices) {
  SIM_CHECK(params >= 0 && bytes_per_param > 0 && devices > 0,
            "{} params at {} bytes over {} devices", params, bytes_per_param, devices);
  const int64_t bytes = params * bytes_per_param;
  return Bytes::of((bytes + devices - 1) / devices);
}

double pipeline_bubble_fraction(int64_t stages, int64_t microbatches) {
  SIM_CHECK(stages > 0 && microbatches > 0, "{} stages, {} microbatches", stages, microbatches);
  return to_d(stages - 1) / to_d(microbatches + stages - 1);
}

int64_t min_microbatches_for_bubble_below(int64_t stages, double max_bubble) {
  SIM_CHECK(stages > 0 && max_bubble > 0.0 && max_bubble < 1.0, "{} stages, bubble bound {}",
            stages, max_bubble);
  // The closed form can land one off in floating point (3 * 0.95 / 0.05 = 56.999...); settle the
  // answer with the bubble fraction itself, which is what the bound is about.
  int64_t m = std::max<int64_t>(
      1, static_cast<int64_t>(std::floor(to_d(stages - 1) * (1.0 - max_bubble) / max_bubble)) + 1);
  while (pipeline_bubble_fraction(stages, m) >= max_bubble) {
    ++m;
  }
  while (m > 1 && pipeline_bubble_fraction(stages, m - 1) < max_bubble) {
    --m;
  }
  return m;
}

Duration training_time(Flops total, int64_t devices, FlopsPerSec peak, double mfu) {
  return total / effective_rate(devices, peak, mfu);
}

double training_days(Flops total, int64_t devices, FlopsPerSec peak, double mfu) {
  return total.count() / effective_rate(devices, peak, mfu).value() / kSecondsPerDay;
}

double training_cost_usd(int64_t devices, double days, double usd_per_device_hour) {
  return to_d(devices) * days * 24.0 * usd_per_device_hour;
}

int64_t chinchilla_tokens(int64_t params) { return 20 * params; }

int64_t chinchilla_optimal_params(Flops compute) {
  SIM_CHECK(compute.count() >= 0.0, "negative compute {}", compute.count());
  return std::llround(std::sqrt(compute.count() / 120.0));
}

int64_t tokens_for_budget(Flops compute, int64_t active_params) {
  SIM_CHECK(active_params > 0, "{} active parameters", active_params);
  return std::llround(compute.count() / (6.0 * to_d(active_params)));
}

int64_t parameter_count_12ld2(int64_t layers, int64_t d_model) {
  return 12 * layers * d_model * d_model;
}

double prefill_tokens_per_second(int64_t params, FlopsPerSec peak) {
  SIM_CHECK(params > 0, "{} parameters", params);
  return peak.value() / (2.0 * to_d(params));
}

Duration decode_time_per_token(int64_t params, int64_t bytes_per_param, BytesPerSec bandwidth) {
  return Bytes::of(params * bytes_per_param) / bandwidth;
}

double decode_tokens_per_second(int64_t params, int64_t bytes_per_param, BytesPerSec bandwidth) {
  SIM_CHECK(params > 0 && bytes_per_param > 0, "{} params at {} bytes", params, bytes_per_param);
  return bandwidth.value() / (to_d(params) * to_d(bytes_per_param));
}

double decode_compute_bound_batch(FlopsPerSec peak, BytesPerSec bandwidth,
                                  int64_t bytes_per_param) {
  SIM_CHECK(bandwidth.value() > 0.0, "bandwidth {}", bandwidth.value());
  return (peak / bandwidth) * to_d(bytes_per_param) / 2.0;
}

double speedup_after_removing(Duration total, Duration removed) {
  SIM_CHECK(removed >= Duration::zero() && removed < total, "removing {} ps of {} ps", removed.ps(),
            total.ps());
  return total / (total - removed);
}

double hidden_comm_fraction(Duration comm, Duration overlapping_compute) {
  if (comm == Duration::zero()) {
    return 1.0;
  }
  return std::min(1.0, overlapping_compute / comm);
}

Bytes activation_bytes_per_layer_simplified(int64_t batch, int64_t seq, int64_t d_model,
                                            int64_t heads, int64_t bytes_per_element) {
  const int64_t input = batch * seq * d_model;
  const int64_t scores = batch * heads * seq * seq;
  return Bytes::of((input + scores) * bytes_per_element);
}

}  // namespace meshsim::workloads
