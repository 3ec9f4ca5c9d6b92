// Chakra execution traces (MLCommons' format, read by ASTRA-sim and PARAM) in and out: per-rank
// traces become meshsim programs, and meshsim's programs become per-rank traces.
//
// The format (mlcommons/chakra; schema/protobuf/et_def.proto, restated in traces/chakra_et.proto):
// one file per rank, `<prefix>.<rank>.et` (src/converter/text_converter.py and src/generator/
// generator.py write "%s.%d.et"; ASTRA-sim's --workload-configuration is the prefix). A file is a
// sequence of records, each a varint length (protobuf's base-128 varint, at most 32 bits) and that
// many bytes of one message (src/third_party/utils/protolib.py encodeMessage / decodeMessage,
// protoio.cc ProtoOutputStream::write): first a GlobalMetadata, then one Node per record to the
// end of the file; plain or gzip-compressed (protoio.cc's ProtoInputStream tells them apart by
// gzip's magic bytes, and so does meshsim). Communicator groups are not in the traces: ASTRA-sim
// reads them from a JSON file ({"<pg_name>": [ranks...], ...}, its --comm-group-configuration),
// which meshsim reads from `comm_group.json` beside the traces.
//
// Import (read_chakra_workload): every node becomes an op of its rank's program, in the order of
// a topological sort of the data dependencies that takes the smallest node id first (a trace
// whose ids already follow its dependencies keeps its order). Data dependencies (Node.data_deps)
// are the op's dependencies; control dependencies (ctrl_deps) record structure (a kernel's host
// operator) and, as in Chakra's feeder and ASTRA-sim, do not order execution.
//   COMP_NODE       a compute op: a node written by meshsim (meshsim_* attributes) is rebuilt as
//                   the kernel it was and costed by the cluster it runs on; otherwise
//                   duration_micros > 0 is its measured time; otherwise num_ops (and tensor_size,
//                   bytes) are FLOPs costed as bf16 work of the op class its name suggests
//                   (classify_kernel; Chakra records no data type); otherwise it takes no time.
//   COMM_COLL_NODE  without comm_type and with is_cpu_op true: the host side of a collective
//                   (PyTorch's c10d operator; its NCCL kernel is a node of its own), a host op of
//                   its measured time. Otherwise
//                   a collective: comm_type (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER(_BLOCK),
//                   ALL_TO_ALL, BROADCAST, REDUCE; BARRIER as a 0-byte all-reduce: a
//                   rendezvous) of comm_size bytes in meshsim's convention (CollectiveWork: the
//                   full buffer, nccl-tests' "size"; Chakra's schema does not define it) over the
//                   group pg_name names in comm_group.json, or over every rank without pg_name
//                   (an involved_dim that is not all true, ASTRA-sim's choice of topology
//                   dimensions, needs a pg_name).
//   COMM_SEND_NODE / COMM_RECV_NODE  a send to comm_dst / a receive from comm_src of comm_size
//                   bytes with comm_tag (default 0), matched k-th with k-th.
//   METADATA_NODE   an op that takes no time (it keeps its dependencies).
//   MEM_LOAD_NODE, MEM_STORE_NODE (ASTRA-sim's remote memory) are refused: meshsim has no remote
//   memory model.
// Streams: a node with an integer attribute "stream" runs on that stream (the values as they are
// when all are below 64, else numbered in order of value from 0); otherwise compute nodes run on
// one compute stream, host operators (is_cpu_op true) on a host stream, and each communicator
// group's collectives and each peer's sends and receives on a stream of their own. A stream runs
// its ops one at a time, in order. Attributes are read by name whatever integer type they were
// written with (comm_type as int64, comm_src as int32, tensor_size as uint64 by Chakra's own
// tools).
//
// Bad input is an InputError naming the file and, where there is one, the node (its id) and the
// field, within bounded time and memory: a record whose varint or message runs past the end of
// the file, a message that does not parse, duplicate node ids, dependencies on nodes that do not
// exist or that form a cycle, counts and sizes past the bounds below, collectives whose members
// disagree (in number, kind or size, in order), sends without their receives.
//
// Export (write_chakra_workload): the programs as `<dir>/rank.<r>.et` and `<dir>/comm_group.json`,
// each op a node with id = its OpId, data_deps = its dependencies plus the previous op of its
// stream (so that a reader without streams keeps the order), the attribute "stream", and:
// compute ops duration_micros (the time the cluster gave it, rounded to the microsecond),
// num_ops and tensor_size (FLOPs and bytes, as ASTRA-sim's roofline reads them) and meshsim's
// own attributes that rebuild the kernel exactly (meshsim_op_class, meshsim_dtype, meshsim_flops,
// meshsim_bytes, meshsim_matmul, meshsim_attention, meshsim_host_copy, meshsim_fast_accumulation,
// meshsim_rate_class,
// meshsim_measured_ps); collectives comm_type, comm_size and pg_name (and meshsim_copy_engine when
// the transfer holds no SMs, CollectiveWork::holds_sms); sends and receives comm_src,
// comm_dst, comm_tag and comm_size. Memory effects and report labels are not exported. The output
// is canonical: the same programs give the same bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "meshsim/sim/ids.h"
#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"

namespace meshsim::traces {

// Bounds on what import reads (each stated in its error).
struct ChakraLimits {
  int64_t max_file_bytes = int64_t{1} << 30;  // one rank's trace
  int64_t max_ranks = int64_t{1} << 17;       // files (kMaxDevices of topology/cluster.h)
  // Nodes in all files together: each becomes an op of a program of its own (~250 bytes), so
  // 2^22 nodes take about 1 GiB.
  int64_t max_nodes = int64_t{1} << 22;
  int64_t max_comm_bytes = int64_t{1} << 50;        // 1 PiB per collective or send
  int64_t max_duration_us = int64_t{86400} * 1000000;  // one day per kernel
};

// Imported traces as meshsim programs.
struct ChakraWorkload {
  std::string source;                       // the directory or prefix read
  std::vector<Program> programs;            // programs[r] is rank r's
  std::vector<std::vector<RankId>> groups;  // communicator groups: ranks, ascending
  std::vector<std::string> group_names;     // each group's pg_name ("" for every rank)
  std::vector<std::vector<GroupId>> group_slots;  // per rank: its program's slots -> groups
  std::vector<std::vector<RankId>> peer_slots;    // per rank: its program's slots -> peers
  // What the nodes were: measured compute times, compute costed by the cluster, no time at all.
  int64_t nodes = 0;
  int64_t measured = 0;
  int64_t modelled = 0;
  int64_t untimed = 0;
  int64_t collectives = 0;
  int64_t p2p = 0;
};

// Reads `path`: a directory of `<prefix>.<rank>.et` files (one prefix) or the prefix itself
// (ASTRA-sim's form: "et/rank" reads et/rank.0.et, et/rank.1.et, ...); ranks 0..N-1, each once.
ChakraWorkload read_chakra_workload(const std::string& path, const ChakraLimits& limits = {});

// One rank's program as export writes it.
struct ChakraRank {
  const Program* program = nullptr;
  std::vector<std::vector<RankId>> groups;  // by group slot: the group's ranks (global)
  std::vector<RankId> peers;                // by peer slot: the peer's rank (global)
  std::vector<Duration> durations;          // by op: the compute op's time (others: ignored)
};

// Writes `ranks` (rank r = ranks[r]) to `dir` (created if missing). `description` goes into every
// file's GlobalMetadata. Throws InputError(dir, ...) when a file cannot be written.
void write_chakra_workload(const std::string& dir, std::span<const ChakraRank> ranks,
                           const std::string& description);

}  // namespace meshsim::traces
