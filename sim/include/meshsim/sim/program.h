// A program: the DAG of ops one rank executes in a training step.
//
// Ops are compute kernels, collectives over a group, or point-to-point sends and receives. A
// program is rank-agnostic: a collective names a *group slot* and a send names a *peer slot*, and
// each rank binds slots to concrete groups and peers (see Simulation::add_rank). So every rank
// with the same role (e.g. every data-parallel replica of one pipeline stage) shares one Program.
//
// Invariants (checked): ops are added in a topological order, i.e. a dependency always points from
// an earlier OpId to a later one, so a Program can never hold a cycle. Each op names the stream it
// runs on; a stream runs its ops one at a time, in OpId order (CUDA stream semantics).
//
// Storage is a Boost.Graph adjacency_list, hidden behind a pimpl (docs/style.md A.2).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "meshsim/sim/enum_names.h"
#include "meshsim/sim/ids.h"
#include "meshsim/sim/units.h"

namespace meshsim {

// Numeric formats of compute ops; the hardware model picks the peak rate by format.
enum class Dtype : uint8_t { kFp32, kTf32, kBf16, kFp16, kFp8 };
constexpr auto enum_names(Dtype) {
  return std::to_array<EnumName<Dtype>>({{Dtype::kFp32, "fp32"},
                                         {Dtype::kTf32, "tf32"},
                                         {Dtype::kBf16, "bf16"},
                                         {Dtype::kFp16, "fp16"},
                                         {Dtype::kFp8, "fp8"}});
}
int64_t bytes_per_element(Dtype d);

// What a kernel does, for efficiency models, reports and trace colouring.
enum class OpClass : uint8_t {
  kMatmul,
  kAttention,
  kElementwise,
  kNorm,
  kEmbedding,
  kLoss,
  kOptimizer,
  kCopy,
  kQuantize,  // FP8 casts: scaling, amax, cast and transpose kernels of an FP8 recipe
  kCommunication,
};
inline constexpr int kNumOpClasses = 10;
constexpr auto enum_names(OpClass) {
  return std::to_array<EnumName<OpClass>>({{OpClass::kMatmul, "matmul"},
                                           {OpClass::kAttention, "attention"},
                                           {OpClass::kElementwise, "elementwise"},
                                           {OpClass::kNorm, "norm"},
                                           {OpClass::kEmbedding, "embedding"},
                                           {OpClass::kLoss, "loss"},
                                           {OpClass::kOptimizer, "optimizer"},
                                           {OpClass::kCopy, "copy"},
                                           {OpClass::kQuantize, "quantize"},
                                           {OpClass::kCommunication, "communication"}});
}

enum class CollectiveKind : uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kAllToAll,
  kBroadcast,
  kReduce,
};
constexpr auto enum_names(CollectiveKind) {
  using K = CollectiveKind;
  return std::to_array<EnumName<K>>({{K::kAllReduce, "all-reduce"},
                                     {K::kReduceScatter, "reduce-scatter"},
                                     {K::kAllGather, "all-gather"},
                                     {K::kAllToAll, "all-to-all"},
                                     {K::kBroadcast, "broadcast"},
                                     {K::kReduce, "reduce"}});
}

enum class MemoryCategory : uint8_t {
  kWeights,
  kGradients,
  kOptimizerState,
  kActivations,
  kCommBuffers,
  kWorkspace,
};
inline constexpr int kNumMemoryCategories = 6;
constexpr auto enum_names(MemoryCategory) {
  using C = MemoryCategory;
  return std::to_array<EnumName<C>>({{C::kWeights, "weights"},
                                     {C::kGradients, "gradients"},
                                     {C::kOptimizerState, "optimizer_state"},
                                     {C::kActivations, "activations"},
                                     {C::kCommBuffers, "comm_buffers"},
                                     {C::kWorkspace, "workspace"}});
}

// GEMM shape [m, k] x [k, n], repeated `batch` times; for shape-dependent efficiency models.
struct MatmulShape {
  int64_t m = 0;
  int64_t k = 0;
  int64_t n = 0;
  int64_t batch = 1;
};

// The fused attention kernels meshsim costs from their own measurements (topology/'s attention
// class): FlashAttention-2 (the flash-attn package, also PyTorch SDPA's flash backend),
// FlashAttention-3 (Hopper), cuDNN's fused flash attention (Transformer Engine's FusedAttention,
// MaxText's cudnn_flash_te), the Pallas flash/splash kernels of JAX on TPU, and FlashAttention's
// Triton port (flash_attn_triton.py: the FlashAttention-1 algorithm; llm-foundry's attn_impl
// triton; no measurement of it was found: costed from the FlashAttention-1 CUDA kernel's).
enum class AttentionImpl : uint8_t { kFlash2, kFlash3, kCudnn, kSplash, kTriton };
constexpr auto enum_names(AttentionImpl) {
  return std::to_array<EnumName<AttentionImpl>>(
      {{AttentionImpl::kFlash2, "flash2"},
       {AttentionImpl::kFlash3, "flash3"},
       {AttentionImpl::kCudnn, "cudnn"},
       {AttentionImpl::kSplash, "splash"},
       {AttentionImpl::kTriton, "triton"}});
}

// What one fused attention kernel computes: batch_heads independent (query block, key block)
// products of seq_q queries against seq_kv keys of head_dim, causal or not, forward or backward.
struct AttentionShape {
  AttentionImpl impl = AttentionImpl::kFlash2;
  bool backward = false;
  bool causal = true;
  int64_t batch_heads = 1;  // batch x query heads on the rank
  int64_t seq_q = 0;
  int64_t seq_kv = 0;
  int64_t head_dim = 0;
};

// A copy between the device and host memory by a copy engine (activation offloading): it moves
// `bytes` over the device's host link (PCIe, NVLink-C2C) in one direction, holds no SMs and does
// no FLOPs. kNone: an ordinary kernel.
enum class HostCopy : uint8_t { kNone, kToHost, kToDevice };

struct ComputeWork {
  OpClass op_class = OpClass::kElementwise;
  Dtype dtype = Dtype::kBf16;
  Flops flops;
  Bytes bytes;  // HBM traffic: bytes read plus bytes written
  std::optional<MatmulShape> shape;
  // Fused attention: costed by its implementation's measurements (the GEMM shape is kept for
  // models without them).
  std::optional<AttentionShape> attention;
  HostCopy host = HostCopy::kNone;
  // An FP8 GEMM run with the library's fast accumulation (partial sums not promoted to FP32 at
  // intervals): what Transformer Engine's recipes and torchao's float8 do for forward GEMMs.
  bool fast_accumulation = false;
  // A memory-bound kernel that runs at another class's rate than the class it is reported under:
  // a cross entropy run as element-wise and reduction kernels (Megatron-LM's and Megatron-Core's,
  // workloads/src/layer_ops.cc) is the loss in reports and runs at the element-wise rate.
  std::optional<OpClass> rate_class = std::nullopt;
  // A kernel whose time was measured (an imported execution trace): it takes exactly this long
  // whatever the cost model would say and whatever runs beside it (the measurement already holds
  // that); per-rank slowdown and jitter still apply.
  std::optional<Duration> measured = std::nullopt;
};

// A GEMM [m,k]x[k,n], `batch` times, as the cost model sees it: 2mkn FLOPs per matrix, both
// operands read at the dtype's width and the output written at `out_bytes` per element.
ComputeWork matmul_work(const MatmulShape& shape, Dtype dtype, int64_t out_bytes);

// `bytes` is the buffer size in nccl-tests' convention: the full buffer for all-reduce, broadcast
// and reduce; the full (gathered / unscattered) buffer for all-gather and reduce-scatter; what one
// rank holds before the exchange for all-to-all.
struct CollectiveWork {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  Bytes bytes;
  uint16_t group_slot = 0;
  // Whether the transfer holds SMs while in flight, slowing the GEMMs beside it (ComputeContext):
  // NCCL's kernels do (one CTA per channel). false: it runs on the copy engines, as Transformer
  // Engine's ring-exchange userbuffers gathers do (use_ce, one SM for signalling).
  bool holds_sms = true;
};

// A send or a receive. Sends and receives between the same two ranks with the same tag match in
// program order (the k-th send matches the k-th receive).
struct PeerWork {
  uint16_t peer_slot = 0;
  Bytes bytes;
  uint16_t tag = 0;
};

enum class OpKind : uint8_t { kCompute, kCollective, kSend, kRecv };
constexpr auto enum_names(OpKind) {
  return std::to_array<EnumName<OpKind>>({{OpKind::kCompute, "compute"},
                                          {OpKind::kCollective, "collective"},
                                          {OpKind::kSend, "send"},
                                          {OpKind::kRecv, "recv"}});
}

// What the rank's host thread does once it has issued an op (the host model, simulation.h):
//  kNone:        goes on issuing the next op.
//  kWaitOp:      blocks until this op has finished on the device (a `.item()` or an
//                event synchronize on its result: the loss, the gradient norm).
//  kWaitDevice:  blocks until every op it has issued so far has finished
//                (`torch.cuda.synchronize()`).
enum class HostSync : uint8_t { kNone, kWaitOp, kWaitDevice };
constexpr auto enum_names(HostSync) {
  return std::to_array<EnumName<HostSync>>({{HostSync::kNone, "none"},
                                            {HostSync::kWaitOp, "wait-op"},
                                            {HostSync::kWaitDevice, "wait-device"}});
}

// A change to the memory ledger when the op starts or ends (negative delta frees).
struct MemoryEffect {
  MemoryCategory category = MemoryCategory::kActivations;
  Bytes delta;
  bool at_end = false;
};

// Where the op sits in the training step, for reports and traces.
struct OpLabels {
  std::optional<int32_t> layer;
  std::optional<int32_t> microbatch;
  std::optional<int32_t> stage;
  // A caller-defined grouping for reports (workloads: the parallelism a communication op
  // serves, so that exposed communication can be reported by kind).
  std::optional<OpCategory> category;
};

struct Op {
  std::string name;
  uint8_t stream = 0;  // 0 is the compute stream; 1.. are communication channels
  std::variant<ComputeWork, CollectiveWork, PeerWork> work;
  bool is_send = false;  // for PeerWork: a send (true) or a receive (false)
  OpLabels labels;
  std::vector<MemoryEffect> memory;
  // The host model (simulation.h): the time the rank's host thread spends issuing this op (the
  // framework's Python and dispatcher work, the launch call), >= 0; and what it waits for after.
  Duration host;
  HostSync host_sync = HostSync::kNone;

  OpKind kind() const;
};

// The most ops one program holds: 2^24 (16,777,216; the default step's programs hold a few
// thousand). Past it, Program::add throws LimitError.
inline constexpr size_t kMaxOps = size_t{1} << 24;
// The most op instances (ops x the ranks running them) one Simulation runs: 2^30 (1,073,741,824).
// The engine keeps 2 bytes of state per instance (a pending-dependency counter, per-op data lives
// once per program). The 405B layout on 98,304 GPUs simulated in full (41 s of CPU, 1.65 GiB;
// docs/performance.md) runs an estimated 0.3 to 0.4 G of them (16 microbatches x 8 layers per
// rank, ~25 ops each; its peak memory alone bounds it below 0.9 G), so the bound admits it and
// keeps a simulation within a minute or two and ~3 GiB, and the engine's 32-bit indices exact. Past it, Simulation::add_rank
// throws LimitError; it is checked as ranks are added, never in the event loop.
inline constexpr size_t kMaxOpInstances = size_t{1} << 30;

class Program {
 public:
  Program();
  ~Program();
  Program(Program&&) noexcept;
  Program& operator=(Program&&) noexcept;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  OpId add(Op op);
  // Room for `ops` ops in all, so that a builder that knows its size (the replay of a measured
  // step: hundreds of thousands of ops) adds them without the vector's regrowth, which holds the
  // old and the new storage at once.
  void reserve(size_t ops);
  // `before` must have been added earlier than `after`.
  void add_dependency(OpId before, OpId after);
  // Changes what the host does after issuing `id` (Op::host_sync), e.g. when a later op takes a
  // batch's synchronisation over.
  void set_host_sync(OpId id, HostSync sync);
  // Memory held when the step starts (weights, optimizer state), by category.
  void set_initial_memory(MemoryCategory category, Bytes bytes);

  size_t size() const;
  const Op& op(OpId id) const;
  std::vector<OpId> successors(OpId id) const;
  std::vector<OpId> predecessors(OpId id) const;
  size_t num_dependencies() const;
  // A topological order computed by Boost.Graph (used to validate and by tools).
  std::vector<OpId> topological_order() const;
  const std::vector<std::pair<MemoryCategory, Bytes>>& initial_memory() const;
  // Number of streams the program uses (max stream index + 1).
  uint8_t num_streams() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meshsim
