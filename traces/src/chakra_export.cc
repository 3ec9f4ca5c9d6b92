// meshsim programs out as Chakra execution traces (chakra.h write_chakra_workload).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "chakra_records.h"
#include "meshsim/sim/error.h"
#include "meshsim/traces/chakra.h"

namespace meshsim::traces {
namespace {

namespace fs = std::filesystem;
namespace pb = meshsim::chakra;

// The version of Chakra's schema these traces follow: the release of et_def.proto as cited in
// chakra_et.proto (Chakra 1.0.0, whose generator writes GlobalMetadata(version="1.0.0")).
constexpr const char* kSchemaVersion = "1.0.0";

pb::AttributeProto& attr(pb::Node& n, const char* name) {
  pb::AttributeProto* a = n.add_attr();
  a->set_name(name);
  return *a;
}

int64_t chakra_comm_type(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce:
      return pb::ALL_REDUCE;
    case CollectiveKind::kReduceScatter:
      return pb::REDUCE_SCATTER;
    case CollectiveKind::kAllGather:
      return pb::ALL_GATHER;
    case CollectiveKind::kAllToAll:
      return pb::ALL_TO_ALL;
    case CollectiveKind::kBroadcast:
      return pb::BROADCAST;
    case CollectiveKind::kReduce:
      return pb::REDUCE;
  }
  return pb::ALL_REDUCE;
}

void compute_attrs(pb::Node& n, const ComputeWork& w, Duration time) {
  n.set_type(pb::COMP_NODE);
  n.set_duration_micros(static_cast<uint64_t>(std::llround(time.microseconds())));
  const double flops = std::min(w.flops.count(), 9.2e18);
  attr(n, "num_ops").set_int64_val(std::llround(flops));
  attr(n, "tensor_size").set_uint64_val(static_cast<uint64_t>(w.bytes.count()));
  attr(n, "meshsim_op_class").set_string_val(std::string(to_string(w.op_class)));
  attr(n, "meshsim_dtype").set_string_val(std::string(to_string(w.dtype)));
  attr(n, "meshsim_flops").set_double_val(w.flops.count());
  attr(n, "meshsim_bytes").set_int64_val(w.bytes.count());
  if (w.shape) {
    pb::Int64List* l = attr(n, "meshsim_matmul").mutable_int64_list();
    for (const int64_t v : {w.shape->m, w.shape->k, w.shape->n, w.shape->batch}) {
      l->add_values(v);
    }
  }
  if (w.attention) {
    const AttentionShape& a = *w.attention;
    pb::Int64List* l = attr(n, "meshsim_attention").mutable_int64_list();
    for (const int64_t v : {static_cast<int64_t>(a.impl), int64_t{a.backward}, int64_t{a.causal},
                            a.batch_heads, a.seq_q, a.seq_kv, a.head_dim}) {
      l->add_values(v);
    }
  }
  if (w.host != HostCopy::kNone) {
    attr(n, "meshsim_host_copy").set_int64_val(static_cast<int64_t>(w.host));
  }
  if (w.fast_accumulation) {
    attr(n, "meshsim_fast_accumulation").set_bool_val(true);
  }
  if (w.rate_class) {
    attr(n, "meshsim_rate_class").set_string_val(std::string(to_string(*w.rate_class)));
  }
  if (w.measured) {
    attr(n, "meshsim_measured_ps").set_int64_val(w.measured->ps());
  }
}

class Writer {
 public:
  // The groups the collectives use, named "0", "1", ... in order of first use (rank by rank, op
  // by op): the order in which import meets them, so that a trace read and written again keeps
  // its names. Bound slots that no collective uses are not written.
  explicit Writer(std::span<const ChakraRank> ranks) : ranks_(ranks) {
    for (const ChakraRank& r : ranks_) {
      for (size_t i = 0; i < r.program->size(); ++i) {
        const auto* c =
            std::get_if<CollectiveWork>(&r.program->op(OpId(static_cast<uint32_t>(i))).work);
        if (c == nullptr) {
          continue;
        }
        std::vector<RankId> sorted = r.groups.at(c->group_slot);
        std::sort(sorted.begin(), sorted.end());
        if (names_.emplace(sorted, names_.size()).second) {
          groups_.push_back(sorted);
        }
      }
    }
  }

  nlohmann::json comm_groups() const {
    nlohmann::json j = nlohmann::json::object();
    for (size_t i = 0; i < groups_.size(); ++i) {
      std::vector<uint32_t> ranks;
      for (const RankId r : groups_[i]) {
        ranks.push_back(r.value());
      }
      j[std::to_string(i)] = ranks;
    }
    return j;
  }

  std::string trace(size_t r, const std::string& description) const {
    const ChakraRank& rank = ranks_[r];
    const Program& p = *rank.program;
    std::string out;
    pb::GlobalMetadata meta;
    meta.set_version(kSchemaVersion);
    pb::AttributeProto* a = meta.add_attr();
    a->set_name("meshsim");
    a->set_string_val(fmt::format("{} (rank {} of {})", description, r, ranks_.size()));
    detail::append_record(out, meta);
    std::vector<std::optional<uint32_t>> last_on_stream(64);
    pb::Node n;
    for (size_t i = 0; i < p.size(); ++i) {
      const OpId id(static_cast<uint32_t>(i));
      const Op& op = p.op(id);
      n.Clear();
      n.set_id(i);
      n.set_name(op.name);
      std::vector<uint64_t> deps;
      for (const OpId d : p.predecessors(id)) {
        deps.push_back(d.value());
      }
      if (const std::optional<uint32_t> prev = last_on_stream[op.stream]) {
        deps.push_back(*prev);
      }
      last_on_stream[op.stream] = static_cast<uint32_t>(i);
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      for (const uint64_t d : deps) {
        n.add_data_deps(d);
      }
      node(n, op, rank, i, r);
      // The host's part (Op::host, Op::host_sync): what issuing the op costs its host thread and
      // what the host waits for after it.
      if (op.host > Duration::zero()) {
        attr(n, "meshsim_host_ps").set_int64_val(op.host.ps());
      }
      if (op.host_sync != HostSync::kNone) {
        attr(n, "meshsim_host_sync").set_string_val(std::string(to_string(op.host_sync)));
      }
      attr(n, "stream").set_int64_val(op.stream);
      attr(n, "is_cpu_op").set_bool_val(false);
      detail::append_record(out, n);
    }
    return out;
  }

 private:
  void node(pb::Node& n, const Op& op, const ChakraRank& rank, size_t i, size_t r) const {
    if (const auto* c = std::get_if<ComputeWork>(&op.work)) {
      compute_attrs(n, *c, i < rank.durations.size() ? rank.durations[i] : Duration::zero());
    } else if (const auto* coll = std::get_if<CollectiveWork>(&op.work)) {
      n.set_type(pb::COMM_COLL_NODE);
      std::vector<RankId> g = rank.groups.at(coll->group_slot);
      std::sort(g.begin(), g.end());
      attr(n, "comm_type").set_int64_val(chakra_comm_type(coll->kind));
      attr(n, "comm_size").set_int64_val(coll->bytes.count());
      attr(n, "pg_name").set_string_val(std::to_string(names_.at(g)));
      if (!coll->holds_sms) {
        attr(n, "meshsim_copy_engine").set_bool_val(true);  // CollectiveWork::holds_sms
      }
    } else {
      const auto& w = std::get<PeerWork>(op.work);
      n.set_type(op.is_send ? pb::COMM_SEND_NODE : pb::COMM_RECV_NODE);
      const auto peer = static_cast<int32_t>(rank.peers.at(w.peer_slot).value());
      const auto self = static_cast<int32_t>(r);
      attr(n, "comm_src").set_int32_val(op.is_send ? self : peer);
      attr(n, "comm_dst").set_int32_val(op.is_send ? peer : self);
      attr(n, "comm_tag").set_int32_val(w.tag);
      attr(n, "comm_size").set_int64_val(w.bytes.count());
    }
  }

  std::span<const ChakraRank> ranks_;
  std::map<std::vector<RankId>, size_t> names_;
  std::vector<std::vector<RankId>> groups_;
};

void write_file(const fs::path& path, const std::string& bytes, const std::string& dir) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) {
    throw InputError(dir, "", fmt::format("cannot write {}", path.string()));
  }
}

}  // namespace

void write_chakra_workload(const std::string& dir, std::span<const ChakraRank> ranks,
                           const std::string& description) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw InputError(dir, "", fmt::format("cannot create the directory: {}",
                                          ec ? ec.message() : "a file is in the way"));
  }
  const Writer w(ranks);
  write_file(fs::path(dir) / "comm_group.json", w.comm_groups().dump(1) + "\n", dir);
  for (size_t r = 0; r < ranks.size(); ++r) {
    write_file(fs::path(dir) / fmt::format("rank.{}.et", r), w.trace(r, description), dir);
  }
}

}  // namespace meshsim::traces
