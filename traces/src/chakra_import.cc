// Chakra execution traces in (chakra.h): files to nodes, nodes to ops, ops to programs, and the
// checks across ranks that the engine relies on.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>
#include <set>
#include <unordered_map>

#include "chakra_records.h"
#include "gzip.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/traces/chakra.h"
#include "meshsim/traces/import.h"

namespace meshsim::traces {
namespace {

namespace fs = std::filesystem;
namespace et = meshsim::chakra;

// The attributes import reads, by name.
struct Attrs {
  const et::AttributeProto* comm_type = nullptr;
  const et::AttributeProto* comm_size = nullptr;
  const et::AttributeProto* tensor_size = nullptr;
  const et::AttributeProto* comm_src = nullptr;
  const et::AttributeProto* comm_dst = nullptr;
  const et::AttributeProto* comm_tag = nullptr;
  const et::AttributeProto* pg_name = nullptr;
  const et::AttributeProto* stream = nullptr;
  const et::AttributeProto* is_cpu_op = nullptr;
  const et::AttributeProto* num_ops = nullptr;
  const et::AttributeProto* involved_dim = nullptr;
  std::map<std::string, const et::AttributeProto*, std::less<>> meshsim;  // meshsim_*
};

// An involved_dim list that names every dimension (or is a single true): all ranks.
bool all_true(const et::AttributeProto& a) {
  if (a.value_case() == et::AttributeProto::kBoolVal) {
    return a.bool_val();
  }
  if (a.value_case() != et::AttributeProto::kBoolList) {
    return false;
  }
  const auto& v = a.bool_list().values();
  return std::all_of(v.begin(), v.end(), [](bool b) { return b; });
}

ComputeWork untimed() {
  ComputeWork w;
  w.measured = Duration::zero();
  return w;
}

Attrs attrs_of(const et::Node& n) {
  Attrs a;
  for (const et::AttributeProto& attr : n.attr()) {
    const std::string& name = attr.name();
    const std::pair<const char*, const et::AttributeProto**> known[] = {
        {"comm_type", &a.comm_type},      {"comm_size", &a.comm_size},
        {"tensor_size", &a.tensor_size},  {"comm_src", &a.comm_src},
        {"comm_dst", &a.comm_dst},        {"comm_tag", &a.comm_tag},
        {"pg_name", &a.pg_name},          {"stream", &a.stream},
        {"is_cpu_op", &a.is_cpu_op},      {"num_ops", &a.num_ops},
        {"involved_dim", &a.involved_dim}};
    for (const auto& [key, slot] : known) {
      if (name == key) {
        *slot = &attr;
      }
    }
    if (name.starts_with("meshsim_")) {
      a.meshsim[name] = &attr;
    }
  }
  return a;
}

// Node names go into reports and traces: printable ASCII, at most 200 characters.
std::string printable(const std::string& s) {
  std::string out;
  for (const char c : s.substr(0, 200)) {
    const auto u = static_cast<unsigned char>(c);
    out += u >= 0x20 && u < 0x7f ? c : '?';
  }
  return out;
}

using Pending = detail::PendingNode;
using detail::integer_value;
using detail::number_value;

class RankReader {
 public:
  RankReader(std::string file, int64_t rank, int64_t ranks, const ChakraLimits& limits,
             int64_t& nodes_so_far, ChakraWorkload& counts)
      : file_(std::move(file)),
        rank_(rank),
        ranks_(ranks),
        limits_(limits),
        nodes_so_far_(nodes_so_far),
        counts_(counts) {}

  std::vector<Pending> read() {
    std::string bytes = read_input_file(file_, limits_.max_file_bytes, "a Chakra trace");
    if (detail::is_gzip(bytes)) {  // as Chakra's protoio.cc reads them, by the magic bytes
      bytes = detail::gunzip(bytes, file_, limits_.max_file_bytes, "a Chakra trace");
    }
    detail::RecordReader records(bytes, file_);
    std::string_view record;
    if (!records.next(record)) {
      throw InputError(file_, "", "empty: expected a GlobalMetadata record, then Node records");
    }
    et::GlobalMetadata meta;
    if (!meta.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
      throw InputError(file_, "record 0 at byte 0", "not a Chakra GlobalMetadata message");
    }
    std::vector<Pending> nodes;
    std::unordered_map<uint64_t, size_t> seen;
    while (records.next(record)) {
      where_ = fmt::format("record {} at byte {}", records.record(), records.offset());
      if (++nodes_so_far_ > limits_.max_nodes) {
        throw InputError(file_, where_,
                         fmt::format("more than {} nodes in all the traces (meshsim builds an op "
                                     "of its own for each)",
                                     limits_.max_nodes));
      }
      et::Node node;
      if (record.empty() || !node.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
        throw InputError(file_, where_,
                         record.empty() ? "an empty Node message (Chakra's Python reader stops at "
                                          "one; expected a node)"
                                        : "not a Chakra Node message");
      }
      if (!seen.emplace(node.id(), nodes.size()).second) {
        fail(node, "id", fmt::format("node {} appears twice (node ids are unique in a trace)",
                                     node.id()));
      }
      nodes.push_back(pending(node));
    }
    return nodes;
  }

 private:
  [[noreturn]] void fail(const et::Node& n, std::string_view field,
                         const std::string& message) const {
    throw InputError(file_, fmt::format("{}, node {} ('{}'), {}", where_, n.id(),
                                        printable(n.name()), field),
                     message);
  }

  int64_t integer(const et::Node& n, const et::AttributeProto* a, std::string_view field,
                  int64_t lo, int64_t hi) const {
    const std::optional<int64_t> v = integer_value(*a);
    if (!v || *v < lo || *v > hi) {
      fail(n, field, fmt::format("expected an integer from {} to {}", lo, hi));
    }
    return *v;
  }

  int64_t comm_bytes(const et::Node& n, const Attrs& a) const {
    const et::AttributeProto* size = a.comm_size != nullptr ? a.comm_size : a.tensor_size;
    if (size == nullptr) {
      fail(n, "comm_size", "a communication node without comm_size (or tensor_size)");
    }
    return integer(n, size, a.comm_size != nullptr ? "comm_size" : "tensor_size", 0,
                   limits_.max_comm_bytes);
  }

  static int64_t rank_in(const RankReader& r, const et::Node& n, const et::AttributeProto* a,
                         std::string_view field) {
    if (a == nullptr) {
      r.fail(n, field, "a send or receive without its peer's rank");
    }
    return r.integer(n, a, field, 0, r.ranks_ - 1);
  }

  Pending pending(const et::Node& n) {
    const Attrs a = attrs_of(n);
    Pending p;
    p.id = n.id();
    p.op.name = printable(n.name());
    p.deps.assign(n.data_deps().begin(), n.data_deps().end());
    if (a.stream != nullptr) {
      p.stream = integer(n, a.stream, "stream", 0, INT64_MAX);
    }
    switch (n.type()) {
      case et::COMP_NODE:
        compute(n, a, p);
        break;
      case et::METADATA_NODE:
        p.op.work = untimed();
        ++counts_.untimed;
        break;
      case et::COMM_COLL_NODE:
        collective(n, a, p);
        break;
      case et::COMM_SEND_NODE:
      case et::COMM_RECV_NODE:
        point_to_point(n, a, p);
        break;
      case et::MEM_LOAD_NODE:
      case et::MEM_STORE_NODE:
        fail(n, "type", "a remote memory node (MEM_LOAD_NODE / MEM_STORE_NODE): meshsim has no "
                        "remote memory model");
      default:
        fail(n, "type", fmt::format("node type {}: expected COMP_NODE, COMM_COLL_NODE, "
                                    "COMM_SEND_NODE, COMM_RECV_NODE or METADATA_NODE",
                                    static_cast<int>(n.type())));
    }
    host_part(n, a, p.op);
    return p;
  }

  // The host's part of an op as meshsim writes it (meshsim_host_ps: Op::host, at most the
  // engine's 100 ms; meshsim_host_sync: Op::host_sync by name).
  void host_part(const et::Node& n, const Attrs& a, Op& op) const {
    if (const auto it = a.meshsim.find("meshsim_host_ps"); it != a.meshsim.end()) {
      op.host = Duration::from_ps(
          integer(n, it->second, "meshsim_host_ps", 0, Milliseconds(100).ps()));
    }
    if (const auto it = a.meshsim.find("meshsim_host_sync"); it != a.meshsim.end()) {
      const std::optional<HostSync> sync =
          it->second->value_case() == et::AttributeProto::kStringVal
              ? parse_enum<HostSync>(it->second->string_val())
              : std::nullopt;
      if (!sync) {
        fail(n, "meshsim_host_sync", fmt::format("expected one of {}", describe_choices<HostSync>()));
      }
      op.host_sync = *sync;
    }
  }

  void compute(const et::Node& n, const Attrs& a, Pending& p) {
    if (a.is_cpu_op != nullptr && integer(n, a.is_cpu_op, "is_cpu_op", 0, 1) == 1) {
      p.implicit = Pending::Implicit::kHost;
    }
    if (!a.meshsim.empty()) {
      p.op.work = meshsim_work(n, a);
      ++counts_.modelled;
      return;
    }
    ComputeWork w;
    if (n.duration_micros() > static_cast<uint64_t>(limits_.max_duration_us)) {
      fail(n, "duration_micros",
           fmt::format("{} us: expected at most {} us (a day)", n.duration_micros(),
                       limits_.max_duration_us));
    }
    w.op_class = classify_kernel("pytorch", n.name());
    if (n.duration_micros() > 0) {
      w.measured = Microseconds(static_cast<double>(n.duration_micros()));
      ++counts_.measured;
    } else if (a.num_ops != nullptr) {
      const std::optional<double> flops = number_value(*a.num_ops);
      if (!flops || !std::isfinite(*flops) || *flops < 0 || *flops > 1e21) {
        fail(n, "num_ops", "expected a number of operations from 0 to 1e21");
      }
      w.flops = Flops::of(*flops);
      if (a.tensor_size != nullptr) {
        w.bytes = Bytes::of(integer(n, a.tensor_size, "tensor_size", 0, limits_.max_comm_bytes));
      }
      ++counts_.modelled;
    } else {
      w.measured = Duration::zero();
      ++counts_.untimed;
    }
    p.op.work = w;
  }

  // A kernel as meshsim wrote it (write_chakra_workload): every field of its ComputeWork.
  ComputeWork meshsim_work(const et::Node& n, const Attrs& a) const {
    const auto get = [&](const char* name) -> const et::AttributeProto* {
      const auto it = a.meshsim.find(name);
      return it == a.meshsim.end() ? nullptr : it->second;
    };
    const auto text = [&](const char* name) -> std::string {
      const et::AttributeProto* v = get(name);
      if (v == nullptr || v->value_case() != et::AttributeProto::kStringVal) {
        fail(n, name, "expected a string attribute");
      }
      return v->string_val();
    };
    ComputeWork w;
    const std::optional<OpClass> cls = parse_enum<OpClass>(text("meshsim_op_class"));
    const std::optional<Dtype> dtype = parse_enum<Dtype>(text("meshsim_dtype"));
    if (!cls || !dtype) {
      fail(n, cls ? "meshsim_dtype" : "meshsim_op_class",
           cls ? fmt::format("expected one of {}", describe_choices<Dtype>())
               : fmt::format("expected one of {}", describe_choices<OpClass>()));
    }
    w.op_class = *cls;
    w.dtype = *dtype;
    const et::AttributeProto* flops = get("meshsim_flops");
    const std::optional<double> f = flops != nullptr ? number_value(*flops) : std::nullopt;
    if (!f || !std::isfinite(*f) || *f < 0 || *f > 1e21) {
      fail(n, "meshsim_flops", "expected a number of FLOPs from 0 to 1e21");
    }
    w.flops = Flops::of(*f);
    if (const et::AttributeProto* b = get("meshsim_bytes")) {
      w.bytes = Bytes::of(integer(n, b, "meshsim_bytes", 0, INT64_MAX));
    }
    if (const et::AttributeProto* m = get("meshsim_matmul")) {
      const std::vector<int64_t> v = extents(n, m, "meshsim_matmul", 4, 0);
      w.shape = MatmulShape{v[0], v[1], v[2], v[3]};
    }
    if (const et::AttributeProto* at = get("meshsim_attention")) {
      const std::vector<int64_t> v = extents(n, at, "meshsim_attention", 7, 3);
      if (v[0] >= static_cast<int64_t>(enum_values<AttentionImpl>().size()) || v[1] > 1 ||
          v[2] > 1) {
        fail(n, "meshsim_attention", "expected [implementation, backward 0/1, causal 0/1, ...]");
      }
      w.attention = AttentionShape{static_cast<AttentionImpl>(v[0]), v[1] == 1, v[2] == 1, v[3],
                                   v[4], v[5], v[6]};
    }
    if (const et::AttributeProto* h = get("meshsim_host_copy")) {
      w.host = static_cast<HostCopy>(integer(n, h, "meshsim_host_copy", 0, 2));
    }
    if (const et::AttributeProto* fa = get("meshsim_fast_accumulation")) {
      w.fast_accumulation = integer(n, fa, "meshsim_fast_accumulation", 0, 1) == 1;
    }
    if (get("meshsim_rate_class") != nullptr) {
      w.rate_class = parse_enum<OpClass>(text("meshsim_rate_class"));
      if (!w.rate_class) {
        fail(n, "meshsim_rate_class",
             fmt::format("expected one of {}", describe_choices<OpClass>()));
      }
    }
    if (const et::AttributeProto* ps = get("meshsim_measured_ps")) {
      w.measured = Duration::from_ps(integer(n, ps, "meshsim_measured_ps", 0, INT64_MAX));
    }
    return w;
  }

  // An int64 list of `count` values: from `first` on, extents from 1 to kMaxGemmExtent; before
  // it, from 0.
  std::vector<int64_t> extents(const et::Node& n, const et::AttributeProto* a, const char* field,
                               int count, int first) const {
    if (a->value_case() != et::AttributeProto::kInt64List ||
        a->int64_list().values_size() != count) {
      fail(n, field, fmt::format("expected a list of {} integers", count));
    }
    std::vector<int64_t> v(a->int64_list().values().begin(), a->int64_list().values().end());
    for (size_t i = 0; i < v.size(); ++i) {
      const int64_t lo = static_cast<int>(i) >= first ? 1 : 0;
      if (v[i] < lo || v[i] > kMaxGemmExtent) {
        fail(n, field, fmt::format("{}: expected extents from {} to {}", v[i], lo,
                                   kMaxGemmExtent));
      }
    }
    return v;
  }

  void collective(const et::Node& n, const Attrs& a, Pending& p) {
    const bool host = a.is_cpu_op != nullptr && integer(n, a.is_cpu_op, "is_cpu_op", 0, 1) == 1;
    if (a.comm_type == nullptr && host) {
      // The host side of a collective (PyTorch's c10d operator, its NCCL kernel a node of its
      // own): a host op of its measured time.
      compute(n, a, p);
      return;
    }
    if (a.comm_type == nullptr) {
      fail(n, "comm_type", "a collective without comm_type");
    }
    const int64_t t = integer(n, a.comm_type, "comm_type", 0, 9);
    static constexpr std::array<std::optional<CollectiveKind>, 10> kKinds = {
        CollectiveKind::kAllReduce,     CollectiveKind::kReduce,    CollectiveKind::kAllGather,
        std::nullopt,                   std::nullopt,               CollectiveKind::kBroadcast,
        CollectiveKind::kAllToAll,      CollectiveKind::kReduceScatter,
        CollectiveKind::kReduceScatter, CollectiveKind::kAllReduce};
    const std::optional<CollectiveKind> kind = kKinds[static_cast<size_t>(t)];
    if (!kind) {
      fail(n, "comm_type", fmt::format("{} ({}): meshsim has no model of gather and scatter", t,
                                       t == 3 ? "GATHER" : "SCATTER"));
    }
    CollectiveWork w;
    w.kind = *kind;
    w.bytes = Bytes::of(t == 9 ? 0 : comm_bytes(n, a));  // BARRIER: a rendezvous
    // meshsim's own: a transfer on the copy engines, which holds no SMs (CollectiveWork).
    if (const auto it = a.meshsim.find("meshsim_copy_engine"); it != a.meshsim.end()) {
      if (it->second->value_case() != et::AttributeProto::kBoolVal) {
        fail(n, "meshsim_copy_engine", "expected a bool");
      }
      w.holds_sms = !it->second->bool_val();
    }
    p.op.work = w;
    p.implicit = Pending::Implicit::kGroup;
    if (a.pg_name != nullptr) {
      if (a.pg_name->value_case() != et::AttributeProto::kStringVal) {
        fail(n, "pg_name", "expected a string (the communicator group's name)");
      }
      p.group_key = a.pg_name->string_val();
    } else if (a.involved_dim != nullptr && !all_true(*a.involved_dim)) {
      fail(n, "involved_dim", "a collective over some dimensions of ASTRA-sim's logical "
                              "topology: meshsim needs its group (a pg_name and "
                              "comm_group.json); without one, every rank");
    }
    ++counts_.collectives;
  }

  void point_to_point(const et::Node& n, const Attrs& a, Pending& p) {
    const bool send = n.type() == et::COMM_SEND_NODE;
    PeerWork w;
    w.bytes = Bytes::of(comm_bytes(n, a));
    w.tag = a.comm_tag != nullptr
                ? static_cast<uint16_t>(integer(n, a.comm_tag, "comm_tag", 0, 65535))
                : 0;
    p.peer = send ? rank_in(*this, n, a.comm_dst, "comm_dst")
                  : rank_in(*this, n, a.comm_src, "comm_src");
    if (p.peer == rank_) {
      fail(n, send ? "comm_dst" : "comm_src",
           fmt::format("rank {} {} itself", rank_, send ? "sends to" : "receives from"));
    }
    p.op.work = w;
    p.op.is_send = send;
    p.implicit = Pending::Implicit::kPeer;
    ++counts_.p2p;
  }

  std::string file_;
  int64_t rank_;
  int64_t ranks_;
  const ChakraLimits& limits_;
  int64_t& nodes_so_far_;
  ChakraWorkload& counts_;
  std::string where_;
};

// `<prefix>.<rank>.et` files of a directory, or of a prefix: rank -> path. One prefix, ranks 0..N-1.
std::vector<std::string> trace_files(const std::string& path, const ChakraLimits& limits) {
  fs::path dir(path);
  std::optional<std::string> prefix;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    prefix = dir.filename().string();
    dir = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  }
  std::map<int64_t, std::string> by_rank;
  std::set<std::string> prefixes;
  if (!fs::is_directory(dir, ec)) {
    throw InputError(path, "", "no such directory of Chakra traces (expected a directory of "
                               "<prefix>.<rank>.et files, or their prefix)");
  }
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(".et")) {
      continue;
    }
    const std::string stem = name.substr(0, name.size() - 3);
    const size_t dot = stem.rfind('.');
    if (dot == std::string::npos || (prefix && stem.substr(0, dot) != *prefix)) {
      continue;
    }
    const std::string digits = stem.substr(dot + 1);
    if (digits.empty() || digits.size() > 9 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    prefixes.insert(stem.substr(0, dot));
    by_rank[std::stoll(digits)] = e.path().string();
    if (static_cast<int64_t>(by_rank.size()) > limits.max_ranks) {
      throw InputError(path, "", fmt::format("more than {} rank traces", limits.max_ranks));
    }
  }
  if (by_rank.empty()) {
    throw InputError(path, "", "no <prefix>.<rank>.et files (Chakra's naming: rank.0.et, ...)");
  }
  if (prefixes.size() > 1) {
    throw InputError(path, "",
                     fmt::format("traces of several prefixes ({}): give the prefix, e.g. {}/{}",
                                 fmt::join(prefixes, ", "), dir.string(), *prefixes.begin()));
  }
  std::vector<std::string> files;
  for (const auto& [rank, file] : by_rank) {
    if (rank != static_cast<int64_t>(files.size())) {
      throw InputError(path, "",
                       fmt::format("no trace of rank {} (ranks are numbered from 0, one file "
                                   "each; the next is {})",
                                   files.size(), file));
    }
    files.push_back(file);
  }
  return files;
}

// comm_group.json beside the traces: {"<pg_name>": [ranks...]}; none: only unnamed groups.
std::map<std::string, std::vector<RankId>> comm_groups(const fs::path& dir, int64_t ranks) {
  std::map<std::string, std::vector<RankId>> out;
  const fs::path file = dir / "comm_group.json";
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    return out;
  }
  const nlohmann::json doc = load_json_file(file.string());
  if (!doc.is_object()) {
    throw InputError(file.string(), "", "expected an object {\"<pg_name>\": [ranks...], ...}");
  }
  for (const auto& [name, members] : doc.items()) {
    const std::string pointer = "/" + name;
    if (!members.is_array() || members.empty() || members.size() > static_cast<size_t>(ranks)) {
      throw InputError(file.string(), pointer,
                       fmt::format("expected a list of 1 to {} ranks", ranks));
    }
    std::set<int64_t> seen;
    for (const auto& m : members) {
      const std::optional<int64_t> r = as_int64(m);
      if (!r || *r < 0 || *r >= ranks || !seen.insert(*r).second) {
        throw InputError(file.string(), pointer,
                         fmt::format("{}: expected distinct ranks from 0 to {}", describe_json(m),
                                     ranks - 1));
      }
    }
    for (const int64_t r : seen) {
      out[name].emplace_back(static_cast<uint32_t>(r));
    }
  }
  return out;
}

}  // namespace

ChakraWorkload read_chakra_workload(const std::string& path, const ChakraLimits& limits) {
  const std::vector<std::string> files = trace_files(path, limits);
  ChakraWorkload w;
  w.source = path;
  const auto ranks = static_cast<int64_t>(files.size());
  const std::map<std::string, std::vector<RankId>> groups =
      comm_groups(fs::path(files.front()).parent_path(), ranks);
  std::vector<std::vector<Pending>> nodes;
  int64_t total = 0;
  for (int64_t r = 0; r < ranks; ++r) {
    nodes.push_back(RankReader(files[static_cast<size_t>(r)], r, ranks, limits, total, w).read());
  }
  w.nodes = total;
  detail::build_programs(nodes, files, groups, w);
  return w;
}

}  // namespace meshsim::traces
