// Multi-rank PyTorch profiler traces in: one rank's Kineto trace (the Chrome JSON that
// torch.profiler's export_chrome_trace and tensorboard_trace_handler write, plain or gzipped),
// read as a stream, in memory bounded by what it keeps, not by the file's size.
//
// What is read (PyTorch 1.8 to 2.x, Kineto's output_json.cc):
//  * the header: "distributedInfo" (rank, world_size, backend, nccl_version, pg_config: each process
//    group's name, description, size and ranks), "deviceProperties" (each GPU's id, name,
//    totalGlobalMem, numSms), and whether "record_shapes" is set;
//  * complete events ("ph":"X") of these categories, each kept as one KinetoEvent:
//      kernel, gpu_memcpy, gpu_memset    device work (device = args.device or pid, stream =
//                                        args.stream or tid, args.correlation, args."External id";
//                                        copies and sets their args.bytes); NCCL kernels their
//                                        collective's metadata (KinetoCollective)
//      cuda_runtime, cuda_driver         host API calls (cudaLaunchKernel, cudaMemcpyAsync,
//                                        cudaStreamSynchronize, ...) with args.correlation
//      cpu_op, operator                  host operators, with args."External id" and, traced with
//                                        record_shapes, what "Input Dims" and "Input type" say
//                                        (KinetoInputs)
//      user_annotation                   record_function ranges whose name a class rule of
//                                        import.h matches ("attention", "Optimizer.step#...");
//                                        "ProfilerStep#N" is a step
//    Every other event (python_function, gpu_user_annotation, flows, instant and metadata events)
//    is checked for its structure and a "ph" string, and skipped.
//
// How it streams: the text (inflated on the fly when gzipped) goes through a splitter that knows
// only JSON's brackets, strings and commas; each top-level value and each event is cut out whole
// and parsed on its own with simdjson's On-Demand API. Memory holds one chunk of the file, one
// event, and what is kept: 48 bytes per kept event, 32 per operator with record_shapes' inputs,
// 136 per GEMM or attention operator's shape, each distinct name once, the collectives' metadata
// (bench/kineto_read_bench.cc and docs/measured-traces.md have the measured figures).
//
// Times: ts and dur are microseconds in the file, integers or with a fraction (Kineto writes
// nanoseconds as three decimals); they are read from their digits, exactly, as integer
// nanoseconds (epoch timestamps of ~1.7e15 us keep their nanoseconds, which a double would not).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meshsim/sim/program.h"

namespace meshsim::traces {

// Bounds on what read_kineto reads and keeps: no trace, however large, endless or deep, makes it
// read, inflate or hold more. Memory is at most about max_kept_events x 216 bytes (an operator
// with its inputs and shape) plus max_name_bytes plus a chunk and an event.
struct KinetoLimits {
  int64_t max_file_bytes = int64_t{64} << 30;    // the file as stored (gzipped or not): 64 GiB
  int64_t max_text_bytes = int64_t{256} << 30;   // the JSON text, after inflating: 256 GiB
  int64_t max_event_bytes = int64_t{1} << 20;    // one event's text: 1 MiB
  int64_t max_header_bytes = int64_t{64} << 20;  // one top-level value besides the events
  int64_t max_kept_events = int64_t{1} << 25;    // 33.5 M events (1.6 GB of KinetoEvents)
  int64_t max_name_bytes = int64_t{256} << 20;   // distinct event names, summed
  int max_depth = 64;                            // nesting levels (Kineto writes 5)
};

enum class KinetoKind : uint8_t {
  kKernel,      // cat kernel
  kMemcpy,      // cat gpu_memcpy
  kMemset,      // cat gpu_memset
  kRuntime,     // cat cuda_runtime or cuda_driver
  kCpuOp,       // cat cpu_op or operator
  kAnnotation,  // cat user_annotation, other than a step
  kStep,        // "ProfilerStep#N" (a user_annotation or cpu_op)
};

inline constexpr uint32_t kNoIndex = UINT32_MAX;

// One kept event, 48 bytes. Host events: device -1, tid their thread; device events: device the
// GPU ordinal, tid their stream. A tid that is a string, or a number outside 32 bits, gets a
// negative id of its own, in order of first use.
struct KinetoEvent {
  int64_t ts_ns = 0;  // start, nanoseconds as written (epoch or profiler clock)
  int64_t dur_ns = 0;
  int64_t correlation = -1;  // args.correlation (runtime calls and their device work)
  int64_t external_id = -1;  // args."External id" (an operator, its runtime calls and kernels)
  int32_t tid = 0;           // thread, or CUDA stream
  uint32_t name = 0;         // index into RankTrace::names
  // Kernels: index into RankTrace::collectives (NCCL metadata); copies and sets: into
  // RankTrace::copy_bytes; operators: into RankTrace::inputs. kNoIndex when there is none.
  uint32_t extra = kNoIndex;
  int16_t device = -1;  // ordinals past 32767 are refused
  KinetoKind kind = KinetoKind::kCpuOp;

  int64_t end_ns() const { return ts_ns + dur_ns; }
};
static_assert(sizeof(KinetoEvent) == 48);

// A collective's metadata, as PyTorch's record_param_comms records it and Kineto copies it onto
// the NCCL kernel (torch/csrc/profiler/util.h, libkineto/src/output_json.cc): "Collective name",
// "In msg nelems", "Out msg nelems", "Group size", "dtype", "Process Group Name", "Process Group
// Ranks", and for point-to-point "Src Rank" / "Dst Rank".
struct KinetoCollective {
  std::string name;  // "allreduce", "_allgather_base", "reduce_scatter_tensor_coalesced", "send", ...
  int64_t in_nelems = -1;
  int64_t out_nelems = -1;
  int64_t group_size = -1;
  std::string dtype;  // "Float", "BFloat16", "Half", ...
  std::string group_name;
  std::vector<int64_t> group_ranks;  // global ranks; empty when the trace does not say
  std::optional<int64_t> src_rank;
  std::optional<int64_t> dst_rank;
};

// What record_shapes says about an operator's inputs. Tensors' bytes are summed over the inputs
// whose dtype has a known size ("float", "c10::BFloat16", "c10::Half", "double", "long int", ...);
// the dims of the first inputs are kept only for the operators that meshsim costs by shape
// (GEMMs: aten::mm, addmm, bmm, baddbmm, _scaled_mm; fused attention: the _flash_attention_*,
// _efficient_attention_*, _scaled_dot_product_*_attention* operators and flash-attn's).
// 32 bytes an operator (a trace with record_shapes has millions); the dims live apart, for the
// few operators that need them.
struct KinetoInputs {
  int64_t tensor_bytes = 0;  // summed over the inputs with a known dtype
  int64_t largest_tensor_bytes = 0;
  int32_t tensors = 0;       // inputs with dims and a known dtype
  uint32_t shape = kNoIndex;   // shape-costed operators: index into RankTrace::shapes
  std::optional<Dtype> dtype;  // of the first tensor input, when meshsim has the format
};

// The dims of an operator's first kShapeInputs inputs, up to kShapeRank each (a GEMM's two
// matrices, batched or not; attention's query, key and value); an input of higher rank, or not a
// tensor, has rank 0. 136 bytes, no allocation.
inline constexpr size_t kShapeInputs = 4;
inline constexpr size_t kShapeRank = 4;
struct KinetoShape {
  std::array<std::array<int64_t, kShapeRank>, kShapeInputs> dims{};
  std::array<uint8_t, kShapeInputs> rank{};
};

struct KinetoProcessGroup {
  std::string name;
  std::string description;
  std::vector<int64_t> ranks;
};

struct KinetoDevice {
  int64_t id = 0;
  std::string name;  // "NVIDIA A100-SXM4-80GB"
  std::optional<int64_t> memory_bytes;
  std::optional<int64_t> sms;
};

struct RankTrace {
  std::string source;
  // distributedInfo; nullopt where the trace does not say.
  std::optional<int64_t> rank;
  std::optional<int64_t> world_size;
  std::string backend;
  std::string nccl_version;
  std::vector<KinetoProcessGroup> groups;
  std::vector<KinetoDevice> devices;
  bool record_shapes = false;

  std::vector<std::string> names;  // distinct event names
  std::deque<KinetoEvent> events;  // in file order
  std::vector<KinetoCollective> collectives;
  // Operators that carry a collective's metadata themselves (record_param_comms; older Kineto
  // does not copy it onto the kernel): External id -> index into `collectives`.
  std::map<int64_t, uint32_t> op_collectives;
  std::vector<int64_t> copy_bytes;
  std::vector<KinetoInputs> inputs;
  std::vector<KinetoShape> shapes;

  int64_t text_bytes = 0;     // JSON text read (inflated)
  int64_t events_seen = 0;    // every element of traceEvents
  int64_t events_skipped = 0; // those not kept

  const std::string& name_of(const KinetoEvent& e) const { return names[e.name]; }
};

// Reads one rank's trace. Throws InputError(path, location, message) on an unreadable file, a
// corrupt or truncated gzip stream ("byte N" of the file), text that is not JSON, is truncated or
// nests deeper than the limit ("byte N" of the JSON text), no "traceEvents" array, an event that is
// not an object or lacks a "ph" string ("/traceEvents/N"), a kept event without a name string or a
// numeric ts or dur, a negative dur, a number outside 64 bits, malformed distributedInfo or
// deviceProperties ("/distributedInfo/..."), or args of the wrong type ("/traceEvents/N/args/..").
// InputSizeError past a limit of `limits` (the message names it).
RankTrace read_kineto(const std::string& path, const KinetoLimits& limits = {});

// The same on the file's bytes in memory (plain or gzipped); `source` names it in errors.
RankTrace read_kineto_bytes(std::string_view bytes, const std::string& source,
                            const KinetoLimits& limits = {});

// The files of a directory that look like traces (names ending in .json or .json.gz), sorted; a
// path that is a file is returned as is. InputError when a directory holds none.
std::vector<std::string> trace_files(const std::vector<std::string>& paths);

}  // namespace meshsim::traces
