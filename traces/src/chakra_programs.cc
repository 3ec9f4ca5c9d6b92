// Imported Chakra nodes into programs (chakra_records.h build_programs): per rank, the data
// dependencies resolved and sorted (Kahn's algorithm, smallest id first: iterative, so that a
// dependency chain of millions of nodes is no deeper on the stack than one node), streams and
// communication slots bound; across ranks, the checks the engine relies on.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "chakra_records.h"
#include "meshsim/sim/error.h"

namespace meshsim::traces::detail {
namespace {

using Implicit = PendingNode::Implicit;

// Streams a program may use (sim/program.h: at most 64).
constexpr size_t kMaxStreams = 64;

struct CollectiveSeen {
  CollectiveKind kind;
  Bytes bytes;
  uint64_t node;
};

struct TransferSeen {
  Bytes bytes;
  uint64_t node;
};

class Builder {
 public:
  Builder(const std::vector<std::string>& files,
          const std::map<std::string, std::vector<RankId>>& named, ChakraWorkload& out)
      : files_(files), named_(named), out_(out) {}

  void rank(size_t r, std::vector<PendingNode>& nodes) {
    r_ = r;
    const std::vector<size_t> order = sorted(nodes);
    const std::vector<uint8_t> streams = stream_of(nodes);
    Program program;
    std::vector<GroupId> group_slots;
    std::vector<RankId> peer_slots;
    std::vector<OpId> op_of(nodes.size());
    std::unordered_map<uint64_t, size_t> index;
    for (size_t i = 0; i < nodes.size(); ++i) {
      index.emplace(nodes[i].id, i);
    }
    for (const size_t i : order) {
      PendingNode& n = nodes[i];
      n.op.stream = streams[i];
      if (auto* c = std::get_if<CollectiveWork>(&n.op.work)) {
        const GroupId g = group(n);
        c->group_slot = slot_of(group_slots, g, n, "pg_name");
        groups_seen_[{g.value(), r}].push_back({c->kind, c->bytes, n.id});
      } else if (auto* p = std::get_if<PeerWork>(&n.op.work)) {
        p->peer_slot = slot_of(peer_slots, RankId(static_cast<uint32_t>(n.peer)), n,
                               n.op.is_send ? "comm_dst" : "comm_src");
        const auto key = n.op.is_send ? std::tuple{r, static_cast<size_t>(n.peer), p->tag}
                                      : std::tuple{static_cast<size_t>(n.peer), r, p->tag};
        (n.op.is_send ? sends_ : recvs_)[key].push_back({p->bytes, n.id});
      }
      op_of[i] = program.add(std::move(n.op));
      for (const uint64_t dep : n.deps) {
        program.add_dependency(op_of[index.at(dep)], op_of[i]);
      }
    }
    out_.programs.push_back(std::move(program));
    out_.group_slots.push_back(std::move(group_slots));
    out_.peer_slots.push_back(std::move(peer_slots));
  }

  void check_across_ranks() const {
    check_collectives();
    check_transfers();
  }

 private:
  [[noreturn]] void fail(size_t rank, uint64_t node, std::string_view field,
                         const std::string& message) const {
    throw InputError(files_[rank], fmt::format("node {}, {}", node, field), message);
  }

  // Kahn's algorithm on the data dependencies, the smallest id first among the ready nodes.
  std::vector<size_t> sorted(std::vector<PendingNode>& nodes) const {
    std::unordered_map<uint64_t, size_t> index;
    for (size_t i = 0; i < nodes.size(); ++i) {
      index.emplace(nodes[i].id, i);
    }
    std::vector<std::vector<size_t>> successors(nodes.size());
    std::vector<size_t> waiting(nodes.size(), 0);
    for (size_t i = 0; i < nodes.size(); ++i) {
      std::vector<uint64_t>& deps = nodes[i].deps;
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      for (const uint64_t d : deps) {
        const auto it = index.find(d);
        if (it == index.end()) {
          fail(r_, nodes[i].id, "data_deps",
               fmt::format("depends on node {}, which is not in the trace", d));
        }
        successors[it->second].push_back(i);
        ++waiting[i];
      }
    }
    using Ready = std::pair<uint64_t, size_t>;  // (id, index)
    std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (waiting[i] == 0) {
        ready.emplace(nodes[i].id, i);
      }
    }
    std::vector<size_t> order;
    order.reserve(nodes.size());
    while (!ready.empty()) {
      const size_t i = ready.top().second;
      ready.pop();
      order.push_back(i);
      for (const size_t s : successors[i]) {
        if (--waiting[s] == 0) {
          ready.emplace(nodes[s].id, s);
        }
      }
    }
    if (order.size() < nodes.size()) {
      uint64_t smallest = UINT64_MAX;
      for (size_t i = 0; i < nodes.size(); ++i) {
        if (waiting[i] > 0) {
          smallest = std::min(smallest, nodes[i].id);
        }
      }
      fail(r_, smallest, "data_deps",
           fmt::format("a cycle of data dependencies: {} nodes wait on each other (node {} is "
                       "the first of them)",
                       nodes.size() - order.size(), smallest));
    }
    return order;
  }

  // Explicit "stream" values as they are when all are below 64 (what meshsim writes), otherwise
  // numbered in order of value from 0; then compute, host, each group and each peer in order of
  // first appearance, on the next streams.
  std::vector<uint8_t> stream_of(const std::vector<PendingNode>& nodes) const {
    std::map<int64_t, size_t> explicit_streams;
    for (const PendingNode& n : nodes) {
      if (n.stream) {
        explicit_streams.emplace(*n.stream, 0);
      }
    }
    const bool keep = explicit_streams.empty() ||
                      explicit_streams.rbegin()->first < static_cast<int64_t>(kMaxStreams);
    size_t next = 0;
    for (auto& [value, index] : explicit_streams) {
      index = keep ? static_cast<size_t>(value) : next;
      next = index + 1;
    }
    std::map<std::pair<int, std::string>, size_t> implicit;  // (kind, key) -> stream
    std::vector<uint8_t> out(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      const PendingNode& n = nodes[i];
      size_t s = 0;
      if (n.stream) {
        s = explicit_streams.at(*n.stream);
      } else {
        const std::string key = n.implicit == Implicit::kGroup  ? n.group_key
                                : n.implicit == Implicit::kPeer ? std::to_string(n.peer)
                                                                 : std::string();
        const auto [it, added] =
            implicit.emplace(std::pair{static_cast<int>(n.implicit), key}, next);
        next += added ? 1 : 0;
        s = it->second;
      }
      if (s >= kMaxStreams) {
        fail(r_, n.id, "stream",
             fmt::format("more than {} streams in one rank's trace (distinct stream values, "
                         "communicator groups and peers)",
                         kMaxStreams));
      }
      out[i] = static_cast<uint8_t>(s);
    }
    return out;
  }

  GroupId group(const PendingNode& n) {
    const auto known = group_ids_.find(n.group_key);
    GroupId g;
    if (known != group_ids_.end()) {
      g = known->second;
    } else {
      std::vector<RankId> members;
      if (n.group_key.empty()) {
        for (size_t r = 0; r < files_.size(); ++r) {
          members.emplace_back(static_cast<uint32_t>(r));
        }
      } else {
        const auto it = named_.find(n.group_key);
        if (it == named_.end()) {
          fail(r_, n.id, "pg_name",
               fmt::format("group \"{}\" is not in comm_group.json beside the traces (expected "
                           "{{\"{}\": [ranks...], ...}})",
                           n.group_key, n.group_key));
        }
        members = it->second;
      }
      g = GroupId(static_cast<uint32_t>(out_.groups.size()));
      out_.groups.push_back(std::move(members));
      out_.group_names.push_back(n.group_key);
      group_ids_.emplace(n.group_key, g);
    }
    const std::vector<RankId>& members = out_.groups[g.index()];
    if (!std::binary_search(members.begin(), members.end(), RankId(static_cast<uint32_t>(r_)))) {
      fail(r_, n.id, "pg_name",
           fmt::format("rank {} is not a member of group \"{}\"", r_, n.group_key));
    }
    return g;
  }

  template <typename T>
  uint16_t slot_of(std::vector<T>& slots, T value, const PendingNode& n, std::string_view field) {
    const auto it = std::find(slots.begin(), slots.end(), value);
    if (it != slots.end()) {
      return static_cast<uint16_t>(it - slots.begin());
    }
    if (slots.size() >= 65535) {
      fail(r_, n.id, field, "more than 65,535 distinct groups or peers in one rank's trace");
    }
    slots.push_back(value);
    return static_cast<uint16_t>(slots.size() - 1);
  }

  // Every member of a group runs the same collectives on it, in the same order.
  void check_collectives() const {
    for (size_t g = 0; g < out_.groups.size(); ++g) {
      const std::vector<RankId>& members = out_.groups[g];
      const auto seen = [&](RankId m) -> const std::vector<CollectiveSeen>& {
        static const std::vector<CollectiveSeen> kNone;
        const auto it = groups_seen_.find({static_cast<uint32_t>(g), m.index()});
        return it == groups_seen_.end() ? kNone : it->second;
      };
      const std::vector<CollectiveSeen>& first = seen(members.front());
      for (const RankId m : members) {
        const std::vector<CollectiveSeen>& mine = seen(m);
        for (size_t k = 0; k < std::max(first.size(), mine.size()); ++k) {
          const bool same = k < first.size() && k < mine.size() && first[k].kind == mine[k].kind &&
                            first[k].bytes == mine[k].bytes;
          if (same) {
            continue;
          }
          const size_t at = k < mine.size() ? m.index() : members.front().index();
          const uint64_t node = k < mine.size() ? mine[k].node : first[k].node;
          const std::string& name = out_.group_names[g];
          fail(at, node, "comm_size",
               fmt::format("collective #{} on {}: {} on rank {} but {} on rank {} (every member "
                           "runs the same collectives in the same order)",
                           k + 1,
                           name.empty() ? std::string("every rank (no pg_name)")
                                        : fmt::format("group \"{}\"", name),
                           describe(first, k),
                           members.front().value(), describe(mine, k), m.value()));
        }
      }
    }
  }

  static std::string describe(const std::vector<CollectiveSeen>& s, size_t k) {
    return k < s.size() ? fmt::format("{} of {} B (node {})", to_string(s[k].kind),
                                      s[k].bytes.count(), s[k].node)
                        : std::string("none");
  }

  // Every send meets a receive of the same size (per pair and tag, k-th with k-th), and back.
  void check_transfers() const {
    const auto check = [&](const auto& from, const auto& to, bool sends) {
      for (const auto& [key, list] : from) {
        const auto it = to.find(key);
        const size_t other = it == to.end() ? 0 : it->second.size();
        const auto& [src, dst, tag] = key;
        for (size_t k = 0; k < list.size(); ++k) {
          if (k < other && it->second[k].bytes == list[k].bytes) {
            continue;
          }
          fail(sends ? src : dst, list[k].node, "comm_size",
               fmt::format("{} #{} from rank {} to rank {} (tag {}) of {} B has {}", 
                           sends ? "send" : "receive", k + 1, src, dst, tag,
                           list[k].bytes.count(),
                           k < other ? fmt::format("a {} of {} B", sends ? "receive" : "send",
                                                   it->second[k].bytes.count())
                                     : std::string(sends ? "no receive" : "no send")));
        }
      }
    };
    check(sends_, recvs_, true);
    check(recvs_, sends_, false);
  }

  const std::vector<std::string>& files_;
  const std::map<std::string, std::vector<RankId>>& named_;
  ChakraWorkload& out_;
  size_t r_ = 0;
  std::map<std::string, GroupId> group_ids_;
  std::map<std::pair<uint32_t, size_t>, std::vector<CollectiveSeen>> groups_seen_;
  std::map<std::tuple<size_t, size_t, uint16_t>, std::vector<TransferSeen>> sends_;
  std::map<std::tuple<size_t, size_t, uint16_t>, std::vector<TransferSeen>> recvs_;
};

}  // namespace

void build_programs(std::vector<std::vector<PendingNode>>& nodes,
                    const std::vector<std::string>& files,
                    const std::map<std::string, std::vector<RankId>>& groups,
                    ChakraWorkload& out) {
  Builder b(files, groups, out);
  for (size_t r = 0; r < nodes.size(); ++r) {
    b.rank(r, nodes[r]);
    nodes[r] = {};  // the ops moved into the program: free the rest
  }
  b.check_across_ranks();
}

}  // namespace meshsim::traces::detail
