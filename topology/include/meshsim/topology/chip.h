// The hardware catalogue: what one accelerator chip can do, each figure with its source.
//
// Contract:
//  * A `Chip` is a plain value. Every number in it was read from a catalogue file in which it sits
//    beside a `source` (datasheet, paper, public measurement, or a stated assumption); the sources
//    are kept in `Chip::sources`, keyed by the field's JSON pointer inside the chip entry
//    (e.g. "/peak/bf16", "/hbm/bandwidth", "/efficiency/matmul").
//  * Peaks are DENSE (no 2:4 sparsity) FLOP/s per dtype. "fp32" is the non-tensor FP32 rate of a
//    GPU's CUDA cores; "tf32" is the tensor-core TF32 rate. A dtype a chip has no published rate
//    for gives std::nullopt from `peak()`; the caller turns that into an error that names the chip.
//  * HBM capacity is the capacity the device reports to software where a reading was available
//    (nvidia-smi / cudaGetDeviceProperties, e.g. H100 SXM: 81559 MiB), otherwise the vendor's
//    figure; each entry's source says which. Bandwidths are bytes/s, decimal.
//  * Interconnect bandwidths are PER DIRECTION. NVLink "900 GB/s" in datasheets is bidirectional:
//    H100 has 18 links x 25 GB/s = 450 GB/s per direction.
//  * `Efficiency` holds the default derating factors of the compute model (docs/model.md):
//    achievable fraction of peak for large bf16 matmuls and of HBM bandwidth for streaming kernels,
//    and a fixed per-kernel launch overhead. They are starting points to be fitted from measured
//    traces.
//
// A `Catalogue` is loaded once (the builtin one is compiled into the library from
// topology/chips.json) and holds chips by name. Loading validates everything and throws InputError
// naming the file, the JSON pointer and what was expected.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"
#include "meshsim/topology/roofline.h"

namespace meshsim::topology {

using meshsim::to_string;

// Numeric formats are the engine's vocabulary type (sim/program.h): parse_enum<Dtype> and to_string
// live there.
using ::meshsim::Dtype;
// All dtypes, in enum order.
const std::vector<Dtype>& all_dtypes();

enum class ChipKind { kGpu, kTpu };
constexpr auto enum_names(ChipKind) {
  return std::to_array<EnumName<ChipKind>>({{ChipKind::kGpu, "gpu"}, {ChipKind::kTpu, "tpu"}});
}

// The last-level cache in front of HBM (GPU L2, CPU L3): a kernel whose traffic fits in it streams
// at the cache's bandwidth (compute_model.h).
struct CacheSpec {
  Bytes capacity;
  BytesPerSec bandwidth;  // bytes read plus written per second, as the HBM bandwidth
};

// How a GEMM's shape changes its efficiency (compute_model.h gives the formula). Tile and units
// describe the hardware and the GEMM library; k_half and call_overhead are fitted from traces.
struct MatmulShapeEfficiency {
  int64_t tile_m = 1;  // output rows of one tile (GPU: the CTA tile of the GEMM kernels)
  int64_t tile_n = 1;  // output columns of one tile
  int64_t units = 1;   // tiles computed at once (GPU: SMs; CPU: cores)
  double k_half = 0;   // reduction length at which a tile reaches half its asymptotic rate, >= 0
  Duration call_overhead;          // fixed cost of one GEMM call, >= 0
  bool per_matrix_calls = false;   // a batched GEMM is one call per matrix (else one call)
  // Other tiles the library chooses from (GPU: cuBLAS's CTA tile configurations); a GEMM runs on
  // the tile, of these and tile_m x tile_n, that wastes least to tile and wave quantization.
  std::vector<std::array<int64_t, 2>> alternative_tiles;
  // Split-K (GPU: cuBLAS's split-K and stream-K kernels): when a GEMM's output tiles leave units
  // idle, the library may cut its reduction into up to units / tiles slices of at least this
  // many k each, computed on as many units and summed; 0: the reduction is never split.
  int64_t split_k_min = 0;
};

// One fitted series of a fused attention kernel (compute_model.h): its efficiency against the
// dense bf16 peak at key length s is e_inf * s / (s + s_half), in the measurements' FLOP
// convention (forward 4 b h s^2 d, halved when causal; backward 2.5 x forward).
enum class AttentionPass : uint8_t { kForward, kBackward, kForwardBackward };
constexpr auto enum_names(AttentionPass) {
  return std::to_array<EnumName<AttentionPass>>({{AttentionPass::kForward, "fwd"},
                                                 {AttentionPass::kBackward, "bwd"},
                                                 {AttentionPass::kForwardBackward, "fwd+bwd"}});
}
struct AttentionEfficiency {
  AttentionImpl impl = AttentionImpl::kFlash2;
  AttentionPass pass = AttentionPass::kForward;
  bool causal = true;
  int64_t head_dim = 128;
  double e_inf = 0;   // (0, 1]
  double s_half = 0;  // >= 0
  // No measurement: cost the kernel as its GEMMs on the matmul model (the Pallas kernels on TPU
  // v3 and v6e; v4, v5e and v5p cost them from v5p's measurements).
  bool as_matmul = false;
};

struct Efficiency {
  double matmul;             // achievable fraction of dense peak for large matmuls, (0, 1]
  double memory;             // achievable fraction of HBM bandwidth for streaming kernels, (0, 1]
  Duration launch_overhead;  // fixed cost added to every kernel / op, >= 0
  std::optional<MatmulShapeEfficiency> matmul_shape;  // absent: efficiency independent of shape
  // Memory efficiency of the kernels of one op class where it differs from `memory` (kernels
  // that move the same bytes run at different fractions of the bandwidth: a broadcast
  // masked_fill, an exp-bound softmax, a multi-tensor optimizer), each in (0, 1].
  std::array<std::optional<double>, kNumOpClasses> memory_by_class{};
  double memory_for(OpClass c) const {
    return memory_by_class[static_cast<size_t>(c)].value_or(memory);
  }
  // The asymptotic efficiency of FP8 GEMMs against the fp8 peak, where it differs from `matmul`.
  std::optional<double> matmul_fp8;
  // How much faster FP8 GEMMs run with fast accumulation (ComputeWork::fast_accumulation: the
  // FP8 recipes' forward GEMMs) than without, the measured ratio of their times (> 0; the product
  // with `matmul_fp8` at most 1); absent: FP8 GEMMs run at `matmul_fp8` either way.
  std::optional<double> matmul_fp8_fast_accum_speedup;
  // The asymptotic efficiency of an FP8 GEMM, with or without fast accumulation.
  double matmul_fp8_for(bool fast_accumulation) const {
    const double plain = matmul_fp8.value_or(matmul);
    return fast_accumulation && matmul_fp8_fast_accum_speedup
               ? plain * *matmul_fp8_fast_accum_speedup
               : plain;
  }
  // Fused attention kernels by implementation (empty: attention costs as its GEMMs).
  std::vector<AttentionEfficiency> attention;
  // SMs (GPU) the kernels of one collective hold while it is in flight; compute that overlaps it
  // runs on the others (absent: communication does not slow compute).
  std::optional<int64_t> comm_units;
};

// GPU scale-up links (NVLink). Bandwidths per direction.
// `efficiency` is the fraction of the line rate that collective traffic achieves (protocol
// overhead on the wire: NCCL rates an H100 link at 20.6 of 25 GB/s); `nvls_efficiency` the further
// fraction that in-switch reduction (NVLink SHARP multimem traffic) achieves, absent on chips
// without NVLS. Both in (0, 1]; a catalogue that omits `efficiency` gets 1 (the line rate).
struct NvlinkSpec {
  int64_t generation;
  int64_t links;
  BytesPerSec link_bandwidth;  // one link, one direction
  double efficiency = 1.0;
  std::optional<double> nvls_efficiency;
  BytesPerSec total_bandwidth() const { return link_bandwidth * static_cast<double>(links); }
};

// A GPU's link to host memory (PCIe, NVLink-C2C): the copy rate each way.
struct HostLinkSpec {
  BytesPerSec to_device;
  BytesPerSec to_host;
};

// TPU inter-chip interconnect. Bandwidths per direction.
struct IciSpec {
  int64_t links;               // ICI ports per chip (4 on a 2D torus, 6 on a 3D torus)
  BytesPerSec link_bandwidth;  // one link, one direction
  double efficiency = 1.0;     // fraction of the line rate collectives achieve, (0, 1]
  int64_t torus_dims;          // 2 or 3
  int64_t chips_per_host;
  // 2D tori: chips along each axis of a full pod (16 on v5e/v6e, 32 on v3). A slice axis is at
  // most this long and wraps iff it spans it. Absent on 3D tori, whose slices are built of cubes.
  std::optional<int64_t> pod_edge;
  BytesPerSec total_bandwidth() const { return link_bandwidth * static_cast<double>(links); }
};

// The GPU generation frameworks key their kernel choices on (compute capability 8.x, 9.x, 10.x).
enum class GpuArchitecture : uint8_t { kAmpere, kHopper, kBlackwell };
constexpr auto enum_names(GpuArchitecture) {
  return std::to_array<EnumName<GpuArchitecture>>({{GpuArchitecture::kAmpere, "ampere"},
                                                   {GpuArchitecture::kHopper, "hopper"},
                                                   {GpuArchitecture::kBlackwell, "blackwell"}});
}

// Figures for tile/wave quantization and occupancy.
struct GpuMicroarch {
  int64_t sm_count;
  std::optional<double> boost_clock_hz;  // absent where no source gives one
  int64_t max_threads_per_sm;
  Bytes smem_per_sm;
  int64_t max_blocks_per_sm;
  std::optional<GpuArchitecture> architecture;  // absent for profiles of other devices
  SmLimits sm_limits() const { return {max_threads_per_sm, smem_per_sm, max_blocks_per_sm}; }
};

// Matrix units of a TPU. The loader checks mxu_count * systolic_peak(rows, cols, clock) against
// the bf16 peak (within 1%).
struct TpuMicroarch {
  int64_t mxu_count;  // per chip (all TensorCores)
  int64_t mxu_rows;
  int64_t mxu_cols;
  double clock_hz;
};

struct Chip {
  std::string name;         // catalogue key, e.g. "h100-sxm"
  std::string description;  // e.g. "NVIDIA H100 SXM5 80GB"
  ChipKind kind = ChipKind::kGpu;
  std::map<Dtype, FlopsPerSec> peaks;  // dense; bf16 always present
  Bytes hbm_capacity;
  BytesPerSec hbm_bandwidth;
  std::optional<CacheSpec> cache;  // absent: every kernel streams from HBM
  // GPUs: NVLink and the NIC of the vendor's reference system (one per GPU).
  std::optional<NvlinkSpec> nvlink;
  std::optional<BytesPerSec> nic_bandwidth;  // per NIC, per direction
  double nic_efficiency = 1.0;  // fraction of the NIC line rate collectives achieve, (0, 1]
  // GPUs: the measured copy rates between the device and pinned host memory (host_link in the
  // catalogue; absent: activation offloading is refused on the chip).
  std::optional<HostLinkSpec> host_link;
  // TPUs: ICI and the data-center network share of one chip.
  std::optional<IciSpec> ici;
  std::optional<BytesPerSec> dcn_bandwidth;  // per chip, per direction
  double dcn_efficiency = 1.0;  // fraction of the DCN share collectives achieve, (0, 1]
  Efficiency efficiency{};
  std::optional<GpuMicroarch> gpu;
  std::optional<TpuMicroarch> tpu;
  // JSON pointer inside the chip entry -> source text. One entry per number above.
  std::map<std::string, std::string> sources;

  std::optional<FlopsPerSec> peak(Dtype dtype) const;
  // The attention implementations the catalogue has efficiencies for, in enum order.
  std::vector<AttentionImpl> attention_impls() const;
  // Source of a field ("/peak/bf16"); empty when the field has none.
  const std::string& source_of(const std::string& pointer) const;
};

class Catalogue {
 public:
  // The catalogue compiled into the library from topology/chips.json.
  static Catalogue builtin();
  // The document it is parsed from (topology/chips.json as compiled in): a base for one-chip
  // profiles that `meshsim calibrate` writes.
  static nlohmann::json builtin_document();
  // A user catalogue file with the same schema.
  static Catalogue load(const std::string& path);
  // Parses an already-read document; `source` names it in errors.
  static Catalogue parse(const nlohmann::json& document, const std::string& source);

  // Throws InputError (naming the catalogue and listing the known names) for an unknown name.
  const Chip& chip(std::string_view name) const;
  bool contains(std::string_view name) const;
  std::vector<std::string> names() const;  // sorted
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::vector<Chip> chips_;  // sorted by name
};

}  // namespace meshsim::topology
