// `meshsim topology` and `meshsim collective`: the cluster's network, and collectives on it in the
// style of nccl-tests.
//
//   meshsim topology --cluster C [--nodes N | --shape XxYxZ]
//   meshsim collective --cluster C [--nodes N | --shape S] --op allreduce --group SPEC
//       [--algo auto|ring|bidirectional-ring|double-binary-tree|halving-doubling|hierarchical|
//              torus-rings|nvls]
//       [--backend analytical|simgrid] --sizes 8B:8GiB [--factor 2] [--json FILE]
//
// Group SPEC (devices, numbered node by node, which are also the ranks): `all`; a list of ranks
// and ranges `0-7,64`; `node:0-3` (every device of nodes 0..3); `rail:K` (device K of every node).
// Rows: size, count (4-byte floats, as nccl-tests' default), time, algbw = bytes / time and busbw
// = algbw x the nccl-tests factor (all-reduce 2(p-1)/p; reduce-scatter, all-gather, all-to-all
// (p-1)/p; broadcast, reduce, send/recv 1), GB/s = 1e9 bytes/s.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "meshsim/topology/cluster.h"
#include "meshsim/scenario/scenario.h"

namespace meshsim::cli {

struct ClusterArgs {
  std::string cluster = "dgx-h100";
  std::optional<int64_t> nodes;
  std::optional<std::string> shape;
  std::optional<std::string> hardware_catalogue;
  scenario::FabricKnobs fabric;  // from flags only
};

topology::ClusterSpec load_cluster_args(const ClusterArgs& args);

void topology_command(const ClusterArgs& args, std::ostream& out);

struct CollectiveArgs {
  ClusterArgs cluster;
  std::string op = "allreduce";
  std::string group = "all";
  std::string algo = "auto";
  std::string proto = "auto";
  std::string nccl = "2.30";
  std::string backend = "analytical";
  std::string sizes = "8B:8GiB";
  int64_t factor = 2;
  std::optional<std::string> json_path;
};

// Ranks of a group SPEC on `spec`'s devices; InputError("--group") when malformed.
std::vector<int64_t> parse_group(const std::string& text, const topology::ClusterSpec& spec);
// Sizes of "MIN:MAX" stepping by `factor`; InputError("--sizes") when malformed.
std::vector<Bytes> parse_sizes(const std::string& text, int64_t factor);

void collective_command(const CollectiveArgs& args, std::ostream& out);

}  // namespace meshsim::cli
