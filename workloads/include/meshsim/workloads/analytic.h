// Closed-form estimates of the scaling workbook (its cases: validation/workbook/): the
// back-of-the-envelope numbers every performance engineer checks a simulator against. Each
// function states its formula; none knows a particular chip (rates are arguments), so this stays
// inside workloads/ (the roofline of a catalogued chip lives in topology/roofline.h).
//
// Conventions: a matmul of [M,K] x [K,N] is 2*M*K*N FLOPs; decimal units; "N" is a parameter
// count, "D" a token count. Functions returning a plain double are ratios, FLOP/byte
// intensities, rates in tokens per second or money, named as such.
#pragma once

#include <cstdint>
#include <vector>

#include "meshsim/sim/units.h"

namespace meshsim::workloads {

// Roofline arithmetic.

// 2*M*K*N / ((M*K + K*N + M*N) * bytes_per_element): read both operands, write the result once.
double matmul_arithmetic_intensity(int64_t m, int64_t k, int64_t n, int64_t bytes_per_element);
// flops_per_element / ((reads + writes) * bytes_per_element); independent of the element count.
double elementwise_arithmetic_intensity(double flops_per_element, int64_t bytes_per_element,
                                        int64_t reads, int64_t writes);
// 2*M*K*N / peak, ceil to the picosecond.
Duration matmul_time_compute_bound(int64_t m, int64_t k, int64_t n, FlopsPerSec peak);
// product(shape) * bytes_per_element * (reads + writes): the HBM traffic of a streaming op.
Bytes elementwise_traffic(const std::vector<int64_t>& shape, int64_t bytes_per_element,
                          int64_t reads, int64_t writes);
// bytes / bandwidth, ceil to the picosecond.
Duration memory_bound_time(Bytes traffic, BytesPerSec bandwidth);
// floor(memory / bytes_per_param): weights only, no KV cache or activations.
int64_t max_params_in_memory(Bytes memory, int64_t bytes_per_param);

// Training efficiency.

// Model FLOPs utilization = tokens/s per device * FLOPs per token / peak. Throws InfeasibleError
// when the ratio exceeds 1: the claimed throughput needs more FLOP/s than the device's peak, so
// the premise is impossible (the message gives both rates and the ratio to 3 decimals).
double model_flops_utilization(double tokens_per_second_per_device, Flops flops_per_token,
                               FlopsPerSec peak);
// ZeRO-3 / FSDP: params * bytes_per_param / devices, rounded up (16 bytes/param with Adam and
// bf16 mixed precision: see training_memory.h).
Bytes fsdp_model_state_bytes_per_device(int64_t params, int64_t bytes_per_param, int64_t devices);
// GPipe / 1F1B bubble: (PP - 1) / (m + PP - 1).
double pipeline_bubble_fraction(int64_t stages, int64_t microbatches);
// Smallest m with (PP - 1) / (m + PP - 1) strictly below max_bubble (0 < max_bubble < 1):
// m = floor((PP - 1) * (1 - max_bubble) / max_bubble) + 1, checked exactly against the bound.
int64_t min_microbatches_for_bubble_below(int64_t stages, double max_bubble);

// Time and cost.

// total / (devices * peak * mfu). Duration spans +-106 days (int64 ps); longer runs throw an
// InternalError: use training_days.
Duration training_time(Flops total, int64_t devices, FlopsPerSec peak, double mfu);
// The same in days (double, so that runs of any length are representable): 6ND-style totals.
double training_days(Flops total, int64_t devices, FlopsPerSec peak, double mfu);
// devices * days * 24 * usd_per_device_hour.
double training_cost_usd(int64_t devices, double days, double usd_per_device_hour);

// Scaling laws (Hoffmann et al. 2022, "Chinchilla").

// D = 20 N tokens.
int64_t chinchilla_tokens(int64_t params);
// C = 6 N D with D = 20 N gives N = sqrt(C / 120), rounded to the nearest parameter.
int64_t chinchilla_optimal_params(Flops compute);
// D = C / (6 N), rounded to the nearest token.
int64_t tokens_for_budget(Flops compute, int64_t active_params);
// 12 L d^2: attention 4d^2 + MLP 8d^2 per layer, no embeddings, norms or biases.
int64_t parameter_count_12ld2(int64_t layers, int64_t d_model);

// Inference.

// Compute-bound prefill: peak / 2N tokens per second.
double prefill_tokens_per_second(int64_t params, FlopsPerSec peak);
// Batch-1 decode reads every weight once per token: N * bytes_per_param / bandwidth.
Duration decode_time_per_token(int64_t params, int64_t bytes_per_param, BytesPerSec bandwidth);
// bandwidth / (N * bytes_per_param), tokens per second (not rounded like the Duration above).
double decode_tokens_per_second(int64_t params, int64_t bytes_per_param, BytesPerSec bandwidth);
// Batch at which decode turns compute bound: 2N*B FLOPs over N*bytes_per_param bytes equals the
// ridge point peak / bandwidth, so B = (peak / bandwidth) * bytes_per_param / 2 (the ridge point
// itself for 16-bit weights). KV-cache reads are neglected.
double decode_compute_bound_batch(FlopsPerSec peak, BytesPerSec bandwidth,
                                  int64_t bytes_per_param = 2);

// Profiles and overlap.

// Amdahl: total / (total - removed).
double speedup_after_removing(Duration total, Duration removed);
// Fraction of a communication hidden under compute that runs alongside it: min(1, compute/comm).
double hidden_comm_fraction(Duration comm, Duration overlapping_compute);

// Activations (the workbook's simplification).

// Workbook exercise 4.5: the layer input [b, s, d] plus one attention score matrix
// [b, heads, s, s], both at bytes_per_element:  (b*s*d + b*heads*s^2) * bytes_per_element.
// A teaching bound, not what a framework stores: see layer_activations in training_memory.h for
// the per-tensor accounting of Korthikanti et al. 2022.
Bytes activation_bytes_per_layer_simplified(int64_t batch, int64_t seq, int64_t d_model,
                                            int64_t heads, int64_t bytes_per_element);

}  // namespace meshsim::workloads
