// The fluid network model: coupled transfers sharing links by generalised max-min fairness.
//
// State: every transfer in flight is in its latency phase (no bytes move), its bandwidth phase
// (bytes move at the rate the solver gave it), or waiting out its floor. A queue holds the next
// event of every transfer (end of latency, last byte, end of floor), ordered by (time, insertion
// sequence) for determinism: the engine's time-bucketed queue (sim/event_queue.h), as lockstep
// groups' transfers share their event times. Superseded events are cancelled lazily: each
// transfer carries a generation, bumped whenever its rate changes, and a popped event of an older
// generation is dropped.
// Re-sharing: when a transfer enters or leaves its bandwidth phase, its shape is marked; before
// the clock moves on, the connected component of transfers reachable from the marked shapes
// through shared links is re-solved (fluid_solver.h), all changes of one instant together. A
// transfer outside that component keeps its rate and its event. Inside it, a transfer whose rate
// changes first books its progress at the old rate, then gets a new event.
// Finding the component: from a narrow shape (at most kWideLinks links: a collective inside a
// node, a send), through an index of the narrow transfers on each link; wide transfers (a
// collective across nodes, or with its images, crossing up to thousands of links) are kept in a
// short list instead and tested pairwise, and from a wide shape every transfer is tested
// pairwise. A pairwise test (do two shapes share a link) is computed once per pair of shapes and
// remembered, in a dense row per wide shape. So a re-share never walks the links of a wide
// shape: representative simulation (few transfers, all wide) tests a few pairs; full simulation
// (hundreds of narrow transfers at once, a few wide) walks the narrow ones' links, or one of them
// where the shape's set of links is closed (no shape over other links touches it). A narrow shape
// that meets fewer narrow shapes than it has links (one with its images: 64 or 192 links that 3
// to 9 shapes cross, in representative simulation of a CP plan) is searched through the list of
// those shapes instead, and its transfers join no link's index (classify).
// Memo: max-min rates depend only on the capacities and on the multiset of shapes in the
// component, and equal shapes get equal rates, so solutions are memoized by the sorted list of
// the component's shape ids (training repeats the same overlaps thousands of times); on a miss,
// O(nnz log links) to solve. Exactness: a transfer alone gets min(cap, C / w) exactly as
// isolated_rate computes it, and completes at start + latency + ceil(bytes / rate) (or its
// floor), exactly isolated_time.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>

#include "fluid_solver.h"
#include "meshsim/collectives/shared_network.h"
#include "meshsim/sim/event_queue.h"
#include "meshsim/sim/error.h"

namespace meshsim::collectives {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Shapes over more links than this are wide: not indexed per link.
constexpr size_t kWideLinks = 256;

// How the transfers sharing a link with a narrow shape's are found (FluidNetwork::classify).
enum class Finder : uint8_t { kUndecided, kLinks, kNeighbours };

struct Shape {
  std::vector<uint32_t> links;
  std::vector<double> weights;
  double cap = 0;        // <= 0: none
  uint32_t link_set = 0;  // shapes over the same links share it (FluidNetwork::link_sets_)
  Finder finder = Finder::kUndecided;  // narrow: decided when a transfer of it first shares
  // kNeighbours: every narrow shape sharing a link with it, itself included.
  std::vector<uint32_t> neighbours;
  // kLinks or undecided: the kNeighbours shapes sharing a link with it.
  std::vector<uint32_t> listed_neighbours;
  std::vector<uint32_t> sharing;  // narrow: its transfers in sharing_
  bool wide() const { return links.size() > kWideLinks; }
};

enum class Phase : uint8_t { kLatency, kBandwidth, kFloor, kFree };
enum class TransferEventKind : uint8_t { kLatencyOver, kBytesDone, kFloorOver };

constexpr uint32_t kNotSharing = std::numeric_limits<uint32_t>::max();
constexpr uint32_t kNoNode = std::numeric_limits<uint32_t>::max();  // the end of a link's list

struct Transfer {
  uint32_t shape = 0;
  Phase phase = Phase::kFree;
  double remaining = 0;  // bytes of progress still to make
  double rate = 0;       // bytes of progress per second (bandwidth phase)
  SimTime last;          // when `remaining` was last booked
  SimTime not_before;    // start + floor
  uint32_t generation = 0;
  uint32_t sharing_pos = kNotSharing;  // its index in sharing_ while it is there
  uint32_t shape_pos = 0;              // narrow, in sharing_: its index in its shape's sharing
  uint32_t first_membership = 0;       // kLinks, in sharing_: its nodes in the link lists
};

// A narrow transfer's place in one link's list of the narrow transfers on it.
struct LinkMembership {
  uint32_t transfer = 0;
  uint32_t prev = kNoNode;
  uint32_t next = kNoNode;
};

struct TransferEvent {
  SimTime time;
  uint32_t transfer = 0;
  uint32_t generation = 0;
  TransferEventKind kind = TransferEventKind::kLatencyOver;
};

struct VectorHash {
  size_t operator()(const std::vector<uint32_t>& v) const noexcept {
    uint64_t h = 1469598103934665603ULL;
    for (const uint32_t x : v) {
      h = (h ^ x) * 1099511628211ULL;
    }
    return static_cast<size_t>(h);
  }
};

// ceil(bytes / rate) in picoseconds: the rounding of Bytes / BytesPerSec (sim/units.h). A time
// past int64 picoseconds (a tiny bandwidth from input) is a LimitError, as there.
Duration drain_time(double bytes, double rate) {
  if (bytes <= 0) {
    return Duration::zero();
  }
  if (std::isinf(rate)) {
    return Duration::zero();
  }
  using meshsim::detail::kTimeOverflow;
  return Duration::from_ps(meshsim::detail::round_to_int64(std::ceil(bytes / rate * 1e12),
                                                           kTimeOverflow));
}

class FluidNetwork final : public SharedNetwork {
 public:
  explicit FluidNetwork(std::vector<double> capacities)
      : capacities_(std::move(capacities)),
        link_set_of_link_(capacities_.size(), kUnused),
        link_head_(capacities_.size(), kNoNode),
        narrow_on_link_(capacities_.size()),
        listed_on_link_(capacities_.size()),
        free_memberships_(kWideLinks + 1) {}

  std::string_view name() const override { return "analytical"; }
  ShapeId add_shape(const CommShape& shape) override;
  TransferId start(SimTime now, ShapeId shape, Bytes bytes, Duration latency,
                   Duration floor) override;
  NetworkAdvance advance(SimTime limit) override;
  size_t active() const override { return active_; }
  SimTime now() const override { return clock_; }
  void on_rate(std::function<void(const TransferRate&)> cb) override {
    rate_subscribers_.push_back(std::move(cb));
  }

 private:
  std::vector<double> capacities_;
  std::vector<Shape> shapes_;
  // Link sets: the distinct lists of links of the shapes. A set is closed while no shape over
  // other links uses any of its links (a node's tensor-parallel collectives, of whatever size,
  // are alone on its NVLink): then the transfers sharing a link with a narrow shape of a closed
  // set are exactly those on its first link, and no wide shape can reach them.
  std::map<std::vector<uint32_t>, uint32_t> link_set_index_;
  std::vector<bool> link_set_closed_;
  std::vector<uint32_t> link_set_of_link_;  // per link: the set using it, kUnused or kMixed
  static constexpr uint32_t kUnused = std::numeric_limits<uint32_t>::max();
  static constexpr uint32_t kMixed = kUnused - 1;
  std::map<std::pair<std::vector<LinkLoad>, double>, uint32_t> shape_index_;
  std::vector<Transfer> transfers_;
  std::vector<uint32_t> free_;
  std::vector<uint32_t> reported_;  // finished at the last advance: free from the next one on
  std::vector<uint32_t> sharing_;  // transfers in their bandwidth phase that cross links
  std::vector<uint32_t> wide_;     // those of them with wide shapes
  // Per link, the narrow transfers in sharing_ on it: an intrusive doubly-linked list through
  // memberships_, where such a transfer holds one node per link of its shape, consecutive from
  // its first_membership. Joining and leaving touch those nodes and the heads alone, and a search
  // walks short lists (a link carries no narrow transfer or one most of the time).
  std::vector<uint32_t> link_head_;  // per link: its first node, or kNoNode
  // Per link: the narrow shapes over it, and those of them found by their neighbours.
  std::vector<std::vector<uint32_t>> narrow_on_link_;
  std::vector<std::vector<uint32_t>> listed_on_link_;
  std::vector<LinkMembership> memberships_;
  std::vector<std::vector<uint32_t>> free_memberships_;  // by size (<= kWideLinks): bases
  BucketQueue<TransferEvent> events_;  // by (time, push order)
  SimTime clock_;
  size_t active_ = 0;
  std::vector<uint32_t> dirty_shapes_;  // of transfers that entered or left sharing_
  // Per wide shape (empty for the others), by the other shape's id: whether the two share a link
  // (kUnknown until asked). Every pair tested has a wide shape in it (reshare), and a wide shape
  // meets most shapes in flight beside it, so a dense row is smaller than a map of pairs.
  enum Overlap : uint8_t { kUnknown, kDisjoint, kShared };
  std::vector<std::vector<Overlap>> overlap_rows_;
  std::unordered_map<std::vector<uint32_t>, std::vector<double>, VectorHash> memo_;
  std::vector<std::function<void(const TransferRate&)>> rate_subscribers_;
  std::vector<bool> transfer_seen_;  // scratch for re-sharing, all-false between uses
  std::vector<bool> shape_reached_;  // scratch for re-sharing, all-false between uses
  std::vector<bool> shape_marked_;   // scratch for classify and add_shape, all-false between
  std::vector<uint32_t> marked_;     // scratch: the shapes marked in it
  std::vector<uint32_t> reached_;    // scratch for re-sharing: the shapes marked in it
  std::vector<uint32_t> members_;    // scratch for re-sharing: the component
  std::vector<uint32_t> key_;        // scratch for re-sharing: its shapes, the memo's key

  void push(SimTime t, uint32_t id, TransferEventKind kind) {
    events_.push(TransferEvent{t, id, transfers_[id].generation, kind});
  }
  void enter_bandwidth(uint32_t id);
  void bytes_done(uint32_t id, std::vector<TransferId>& finished);
  void set_rate(uint32_t id, double rate);
  bool overlap(uint32_t a, uint32_t b);
  uint32_t add_link_set(const std::vector<uint32_t>& links);
  void meet_listed(uint32_t id);
  void classify(uint32_t id);
  void join(uint32_t id);
  void leave(uint32_t id);
  uint32_t take_memberships(uint32_t n);
  void give_memberships(uint32_t first, uint32_t n);
  void reshare();
  void find_component();
  std::vector<double> solve(const std::vector<uint32_t>& members) const;
};

ShapeId FluidNetwork::add_shape(const CommShape& shape) {
  const double cap = shape.rate_cap ? shape.rate_cap->value() : 0.0;
  auto key = std::make_pair(shape.loads, cap);
  if (const auto it = shape_index_.find(key); it != shape_index_.end()) {
    return ShapeId(it->second);
  }
  Shape s;
  s.cap = cap;
  for (const LinkLoad& l : shape.loads) {
    SIM_CHECK(l.link.index() < capacities_.size() && l.weight > 0, "load on link {} weight {}",
              l.link.value(), l.weight);
    SIM_CHECK(s.links.empty() || s.links.back() < l.link.value(),
              "loads not sorted by link at link {}", l.link.value());
    s.links.push_back(l.link.value());
    s.weights.push_back(l.weight);
  }
  s.link_set = add_link_set(s.links);
  const auto id = static_cast<uint32_t>(shapes_.size());
  shapes_.push_back(std::move(s));
  shape_reached_.push_back(false);
  shape_marked_.push_back(false);
  overlap_rows_.emplace_back();
  shape_index_.emplace(std::move(key), id);
  if (!shapes_[id].wide()) {
    meet_listed(id);
    for (const uint32_t l : shapes_[id].links) {
      narrow_on_link_[l].push_back(id);
    }
  }
  return ShapeId(id);
}

// A new narrow shape and the kNeighbours shapes it shares a link with learn of each other.
void FluidNetwork::meet_listed(uint32_t id) {
  for (const uint32_t l : shapes_[id].links) {
    for (const uint32_t other : listed_on_link_[l]) {
      if (!shape_marked_[other]) {
        shape_marked_[other] = true;
        marked_.push_back(other);
        shapes_[other].neighbours.push_back(id);
        shapes_[id].listed_neighbours.push_back(other);
      }
    }
  }
  for (const uint32_t other : marked_) {
    shape_marked_[other] = false;
  }
  marked_.clear();
}

// How a narrow shape's component is searched, chosen once, when a transfer of it first shares:
// through the link lists (kLinks: its transfers join the list of each of its links, and a search
// from it walks them), or, where fewer shapes share a link with it than it has links (a shape with
// its images crosses dozens of links that few other shapes cross), through its list of those
// neighbours (kNeighbours: its transfers join no link list; a search from it walks the neighbours'
// transfers, and one from a kLinks shape walks its listed_neighbours' besides the link lists).
void FluidNetwork::classify(uint32_t id) {
  Shape& s = shapes_[id];
  bool few = true;
  for (const uint32_t l : s.links) {
    for (const uint32_t other : narrow_on_link_[l]) {
      if (!shape_marked_[other]) {
        shape_marked_[other] = true;
        marked_.push_back(other);
      }
    }
    if (marked_.size() >= s.links.size()) {
      few = false;
      break;
    }
  }
  for (const uint32_t other : marked_) {
    shape_marked_[other] = false;
  }
  if (!few) {
    marked_.clear();
    s.finder = Finder::kLinks;
    return;
  }
  s.finder = Finder::kNeighbours;
  s.neighbours = marked_;
  marked_.clear();
  for (const uint32_t other : s.neighbours) {
    if (other != id && shapes_[other].finder != Finder::kNeighbours) {
      shapes_[other].listed_neighbours.push_back(id);
    }
  }
  for (const uint32_t l : s.links) {
    listed_on_link_[l].push_back(id);
  }
}

// The id of this list of links' set, new or not; a new one opens the sets it meets on a link.
uint32_t FluidNetwork::add_link_set(const std::vector<uint32_t>& links) {
  const auto [it, added] =
      link_set_index_.emplace(links, static_cast<uint32_t>(link_set_closed_.size()));
  const uint32_t set = it->second;
  if (!added) {
    return set;
  }
  link_set_closed_.push_back(true);
  for (const uint32_t l : links) {
    uint32_t& on_link = link_set_of_link_[l];
    if (on_link == kUnused) {
      on_link = set;
      continue;
    }
    if (on_link != kMixed) {
      link_set_closed_[on_link] = false;
      on_link = kMixed;
    }
    link_set_closed_[set] = false;
  }
  return set;
}

TransferId FluidNetwork::start(SimTime now, ShapeId shape, Bytes bytes, Duration latency,
                               Duration floor) {
  SIM_CHECK(now >= clock_, "transfer started at {} ps, before the network's clock {} ps",
            now.ps(), clock_.ps());
  SIM_CHECK(shape.index() < shapes_.size(), "unknown shape {}", shape.value());
  clock_ = now;
  uint32_t id = 0;
  if (free_.empty()) {
    id = static_cast<uint32_t>(transfers_.size());
    transfers_.emplace_back();
    transfer_seen_.push_back(false);
  } else {
    id = free_.back();
    free_.pop_back();
  }
  Transfer& t = transfers_[id];
  const uint32_t generation = t.generation + 1;
  t = Transfer{shape.value(), Phase::kLatency, bytes.as_double(), 0, now, now + floor, generation,
               kNotSharing};
  ++active_;
  push(now + latency, id, TransferEventKind::kLatencyOver);
  return TransferId(id);
}

void FluidNetwork::enter_bandwidth(uint32_t id) {
  Transfer& t = transfers_[id];
  const Shape& s = shapes_[t.shape];
  if (t.remaining <= 0 || (s.links.empty() && s.cap <= 0)) {
    t.phase = Phase::kBandwidth;
    t.rate = kInf;
    push(clock_, id, TransferEventKind::kBytesDone);
    return;
  }
  t.phase = Phase::kBandwidth;
  t.rate = 0;
  t.last = clock_;
  if (s.links.empty()) {  // capped only: no link to share, rate = cap
    set_rate(id, s.cap);
    return;
  }
  join(id);
}

void FluidNetwork::join(uint32_t id) {
  Transfer& t = transfers_[id];
  Shape& s = shapes_[t.shape];
  t.sharing_pos = static_cast<uint32_t>(sharing_.size());
  sharing_.push_back(id);
  if (s.wide()) {
    wide_.push_back(id);
    dirty_shapes_.push_back(t.shape);
    return;
  }
  if (s.finder == Finder::kUndecided) {
    classify(t.shape);
  }
  t.shape_pos = static_cast<uint32_t>(s.sharing.size());
  s.sharing.push_back(id);
  if (s.finder == Finder::kLinks) {
    const auto n = static_cast<uint32_t>(s.links.size());
    t.first_membership = take_memberships(n);
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t node = t.first_membership + i;
      uint32_t& head = link_head_[s.links[i]];
      memberships_[node] = LinkMembership{id, kNoNode, head};
      if (head != kNoNode) {
        memberships_[head].prev = node;
      }
      head = node;
    }
  }
  dirty_shapes_.push_back(t.shape);
}

uint32_t FluidNetwork::take_memberships(uint32_t n) {
  if (std::vector<uint32_t>& firsts = free_memberships_[n]; !firsts.empty()) {
    const uint32_t first = firsts.back();
    firsts.pop_back();
    return first;
  }
  const auto first = static_cast<uint32_t>(memberships_.size());
  SIM_CHECK(memberships_.size() + n < kNoNode, "{} link memberships", memberships_.size());
  memberships_.resize(memberships_.size() + n);
  return first;
}

void FluidNetwork::give_memberships(uint32_t first, uint32_t n) {
  free_memberships_[n].push_back(first);
}

void FluidNetwork::leave(uint32_t id) {
  Transfer& t = transfers_[id];
  Shape& s = shapes_[t.shape];
  sharing_[t.sharing_pos] = sharing_.back();
  transfers_[sharing_.back()].sharing_pos = t.sharing_pos;
  sharing_.pop_back();
  t.sharing_pos = kNotSharing;
  dirty_shapes_.push_back(t.shape);
  if (s.wide()) {
    const auto it = std::find(wide_.begin(), wide_.end(), id);
    *it = wide_.back();
    wide_.pop_back();
    return;
  }
  s.sharing[t.shape_pos] = s.sharing.back();
  transfers_[s.sharing.back()].shape_pos = t.shape_pos;
  s.sharing.pop_back();
  if (s.finder == Finder::kLinks) {
    const auto n = static_cast<uint32_t>(s.links.size());
    for (uint32_t i = 0; i < n; ++i) {
      const LinkMembership& m = memberships_[t.first_membership + i];
      (m.prev != kNoNode ? memberships_[m.prev].next : link_head_[s.links[i]]) = m.next;
      if (m.next != kNoNode) {
        memberships_[m.next].prev = m.prev;
      }
    }
    give_memberships(t.first_membership, n);
  }
}

// Books the progress made at the old rate and schedules the last byte at the new one.
void FluidNetwork::set_rate(uint32_t id, double rate) {
  Transfer& t = transfers_[id];
  t.remaining = std::max(0.0, t.remaining - t.rate * (clock_ - t.last).seconds());
  t.last = clock_;
  t.rate = rate;
  ++t.generation;
  push(clock_ + drain_time(t.remaining, t.rate), id, TransferEventKind::kBytesDone);
  for (const auto& cb : rate_subscribers_) {
    cb(TransferRate{clock_, TransferId(id), ShapeId(t.shape), rate});
  }
}

void FluidNetwork::bytes_done(uint32_t id, std::vector<TransferId>& finished) {
  Transfer& t = transfers_[id];
  if (t.sharing_pos != kNotSharing) {
    leave(id);
  }
  if (!std::isinf(t.rate)) {
    for (const auto& cb : rate_subscribers_) {
      cb(TransferRate{clock_, TransferId(id), ShapeId(t.shape), 0.0});
    }
  }
  t.rate = 0;
  t.remaining = 0;
  if (t.not_before > clock_) {
    t.phase = Phase::kFloor;
    push(t.not_before, id, TransferEventKind::kFloorOver);
    return;
  }
  t.phase = Phase::kFree;
  finished.push_back(TransferId(id));
}

NetworkAdvance FluidNetwork::advance(SimTime limit) {
  SIM_CHECK(limit >= clock_, "advance to {} ps, before the clock {} ps", limit.ps(), clock_.ps());
  // Ids reported last time are the caller's until now (it may start transfers while it handles
  // them): only now can they be reused.
  free_.insert(free_.end(), reported_.begin(), reported_.end());
  reported_.clear();
  NetworkAdvance out;
  while (true) {
    reshare();
    while (!events_.empty() &&
           events_.top().generation != transfers_[events_.top().transfer].generation) {
      events_.pop();
    }
    if (events_.empty() || events_.top().time > limit) {
      SIM_CHECK(limit < SimTime::max() || !events_.empty(),
                "advance without a limit or a transfer");
      clock_ = limit;
      out.time = clock_;
      return out;
    }
    clock_ = events_.top().time;
    while (!events_.empty() && events_.top().time == clock_) {
      const TransferEvent e = events_.pop();
      Transfer& t = transfers_[e.transfer];
      if (e.generation != t.generation) {
        continue;
      }
      switch (e.kind) {
        case TransferEventKind::kLatencyOver:
          enter_bandwidth(e.transfer);
          break;
        case TransferEventKind::kBytesDone:
          bytes_done(e.transfer, out.finished);
          break;
        case TransferEventKind::kFloorOver:
          t.phase = Phase::kFree;
          out.finished.push_back(TransferId(e.transfer));
          break;
      }
    }
    if (!out.finished.empty()) {
      reshare();
      std::sort(out.finished.begin(), out.finished.end());
      for (const TransferId id : out.finished) {
        ++transfers_[id.index()].generation;  // no stale event of it may fire again
        reported_.push_back(id.value());
        --active_;
      }
      out.time = clock_;
      return out;
    }
  }
}

// Whether shapes a and b share a link (both lists sorted), computed once per pair; one of them is
// wide.
bool FluidNetwork::overlap(uint32_t a, uint32_t b) {
  if (a == b) {
    return true;  // a shape in sharing_ crosses at least one link
  }
  if (!shapes_[a].wide()) {
    std::swap(a, b);
  }
  SIM_CHECK(shapes_[a].wide(), "overlap of shapes {} and {}, neither wide", a, b);
  std::vector<Overlap>& row = overlap_rows_[a];
  if (row.size() <= b) {
    row.resize(shapes_.size(), kUnknown);
  }
  if (row[b] != kUnknown) {
    return row[b] == kShared;
  }
  const auto* small = &shapes_[a].links;
  const auto* large = &shapes_[b].links;
  if (small->size() > large->size()) {
    std::swap(small, large);
  }
  const bool shared = std::any_of(small->begin(), small->end(), [large](uint32_t l) {
    return std::binary_search(large->begin(), large->end(), l);
  });
  row[b] = shared ? kShared : kDisjoint;
  return shared;
}

// The component to re-share, into members_: every transfer in sharing_ reachable from the marked
// shapes through shapes that share a link; the marks are cleared. What a shape reaches depends on
// the shape alone (sharing_ does not change meanwhile), so each is searched from once: lockstep
// transfers of one shape, and the marked shapes of members, are not searched again.
void FluidNetwork::find_component() {
  std::vector<uint32_t>& members = members_;
  members.clear();
  auto add = [&](uint32_t id) {
    if (!transfer_seen_[id]) {
      transfer_seen_[id] = true;
      members.push_back(id);
    }
  };
  auto reach = [&](uint32_t from_shape) {
    if (shape_reached_[from_shape]) {
      return;
    }
    shape_reached_[from_shape] = true;
    reached_.push_back(from_shape);
    const Shape& from = shapes_[from_shape];
    const auto add_tested = [&](const std::vector<uint32_t>& candidates) {
      for (const uint32_t id : candidates) {
        if (!transfer_seen_[id] && overlap(from_shape, transfers_[id].shape)) {
          add(id);
        }
      }
    };
    const auto add_on_link = [&](uint32_t l) {
      for (uint32_t node = link_head_[l]; node != kNoNode; node = memberships_[node].next) {
        add(memberships_[node].transfer);
      }
    };
    const auto add_sharing = [&](const std::vector<uint32_t>& shapes) {
      for (const uint32_t shape : shapes) {
        for (const uint32_t id : shapes_[shape].sharing) {
          add(id);
        }
      }
    };
    if (from.wide()) {
      add_tested(sharing_);
      return;
    }
    if (from.finder == Finder::kNeighbours) {
      add_tested(wide_);
      add_sharing(from.neighbours);
      return;
    }
    add_sharing(from.listed_neighbours);
    if (link_set_closed_[from.link_set]) {
      add_on_link(from.links.front());
    } else {
      add_tested(wide_);
      for (const uint32_t l : from.links) {
        add_on_link(l);
      }
    }
  };
  for (const uint32_t shape : dirty_shapes_) {
    reach(shape);
  }
  dirty_shapes_.clear();
  for (size_t i = 0; i < members.size(); ++i) {
    reach(transfers_[members[i]].shape);
  }
  for (const uint32_t id : members) {
    transfer_seen_[id] = false;
  }
  for (const uint32_t shape : reached_) {
    shape_reached_[shape] = false;
  }
  reached_.clear();
}

void FluidNetwork::reshare() {
  if (dirty_shapes_.empty()) {
    return;
  }
  find_component();
  std::vector<uint32_t>& members = members_;
  if (members.empty()) {  // what left shared no link with anything still in flight
    return;
  }
  std::sort(members.begin(), members.end(), [this](uint32_t a, uint32_t b) {
    const uint32_t sa = transfers_[a].shape;
    const uint32_t sb = transfers_[b].shape;
    return sa != sb ? sa < sb : a < b;
  });
  std::vector<uint32_t>& key = key_;
  key.clear();
  for (const uint32_t id : members) {
    key.push_back(transfers_[id].shape);
  }
  auto it = memo_.find(key);
  if (it == memo_.end()) {
    it = memo_.emplace(key, solve(members)).first;
  }
  for (size_t i = 0; i < members.size(); ++i) {
    if (transfers_[members[i]].rate != it->second[i]) {
      set_rate(members[i], it->second[i]);
    }
  }
}

// Max-min rates of `members`, on their links relabelled 0..L-1.
std::vector<double> FluidNetwork::solve(const std::vector<uint32_t>& members) const {
  std::vector<uint32_t> links;
  for (const uint32_t id : members) {
    const auto& l = shapes_[transfers_[id].shape].links;
    links.insert(links.end(), l.begin(), l.end());
  }
  std::sort(links.begin(), links.end());
  links.erase(std::unique(links.begin(), links.end()), links.end());
  std::vector<double> caps;
  caps.reserve(links.size());
  for (const uint32_t l : links) {
    caps.push_back(capacities_[l]);
  }
  std::vector<std::vector<uint32_t>> local(members.size());
  std::vector<detail::FluidEntity> entities;
  entities.reserve(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    const Shape& s = shapes_[transfers_[members[i]].shape];
    local[i].reserve(s.links.size());
    for (const uint32_t l : s.links) {
      local[i].push_back(static_cast<uint32_t>(
          std::lower_bound(links.begin(), links.end(), l) - links.begin()));
    }
    entities.push_back(detail::FluidEntity{local[i], s.weights, s.cap});
  }
  return detail::max_min_rates(entities, caps);
}

}  // namespace

std::unique_ptr<SharedNetwork> make_fluid_network(std::vector<double> capacities) {
  return std::make_unique<FluidNetwork>(std::move(capacities));
}

Duration run_alone(SharedNetwork& network, const CommShape& shape) {
  SIM_CHECK(network.active() == 0, "run_alone on a network with {} transfers in flight",
            network.active());
  const ShapeId id = network.add_shape(shape);
  const SimTime t0 = network.now();
  const TransferId t = network.start(t0, id, shape.bytes, shape.latency, shape.floor);
  while (true) {
    const NetworkAdvance a = network.advance(SimTime::max());
    if (std::find(a.finished.begin(), a.finished.end(), t) != a.finished.end()) {
      return a.time - t0;
    }
  }
}

}  // namespace meshsim::collectives
