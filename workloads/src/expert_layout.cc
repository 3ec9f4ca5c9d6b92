// The expert groups of a rank layout (parallel.h): the EP group, the expert-data-parallel group
// and the flex dispatcher's two hops; and the route a token takes over them (partition.h).
#include <algorithm>
#include <iterator>
#include <vector>

#include "meshsim/workloads/parallel.h"
#include "meshsim/workloads/partition.h"

namespace meshsim::workloads {
namespace {

// The most nodes one routing group's experts span: experts sit on the EP ranks in order (E/EP
// each), the EP group's ranks of one node hold a contiguous range of `per_node` experts.
int64_t nodes_per_group(const MoeConfig& e, int64_t per_node) {
  const int64_t size = e.num_experts / e.routing_groups;
  int64_t most = 1;
  for (int64_t g = 0; g < e.routing_groups; ++g) {
    most = std::max(most, ((g + 1) * size - 1) / per_node - g * size / per_node + 1);
  }
  return most;
}

// The nodes a token's k experts reach on average under uniform routing over `nodes` nodes of
// `per_node` experts each: nodes x (1 - C(E - M, k) / C(E, k)), the chance that a node holds
// none of them being the product below.
double expected_nodes(int64_t experts, int64_t per_node, int64_t k, int64_t nodes) {
  double none = 1.0;
  for (int64_t i = 0; i < k; ++i) {
    none *= std::max(0.0, static_cast<double>(experts - per_node - i) /
                              static_cast<double>(experts - i));
  }
  return static_cast<double>(nodes) * (1.0 - none);
}

}  // namespace

FlexRoute flex_route(const ModelConfig& m, const ParallelPlan& p) {
  const RankLayout layout(p);
  FlexRoute r;
  r.per_node = static_cast<int64_t>(layout.expert_node_group(0).size());
  r.nodes = static_cast<int64_t>(layout.expert_rail_group(0).size());
  const MoeConfig& e = *m.moe;
  const int64_t experts_per_node = r.per_node * (e.num_experts / p.ep);
  // A token's k experts lie in routing_group_topk groups, each on at most nodes_per_group nodes;
  // uniform routing reaches fewer nodes than k on average when a node holds several experts.
  const int64_t bound = e.routing_group_topk * nodes_per_group(e, experts_per_node);
  r.node_copies = std::min(static_cast<double>(bound),
                           expected_nodes(e.num_experts, experts_per_node, e.experts_per_token,
                                          r.nodes));
  return r;
}

int64_t RankLayout::pool_size() const {
  int64_t n = 1;
  for (const Axis a : pool_axes_) {
    n *= size_[static_cast<size_t>(a)];
  }
  return n;
}

int64_t RankLayout::pool_position(int64_t r) const {
  int64_t position = 0;
  int64_t weight = 1;
  for (const Axis a : pool_axes_) {
    position += digit(r, a) * weight;
    weight *= size_[static_cast<size_t>(a)];
  }
  return position;
}

int64_t RankLayout::pool_rank(int64_t r, int64_t position) const {
  int64_t out = r;
  for (const Axis a : pool_axes_) {
    const auto i = static_cast<size_t>(a);
    out += (position % size_[i] - digit(r, a)) * stride_[i];
    position /= size_[i];
  }
  return out;
}

std::vector<int64_t> RankLayout::expert_group(int64_t r) const {
  const int64_t first = pool_position(r) / ep_ * ep_;
  std::vector<int64_t> out;
  for (int64_t k = first; k < first + ep_; ++k) {
    out.push_back(pool_rank(r, k));
  }
  return out;
}

std::vector<int64_t> RankLayout::expert_dp_group(int64_t r) const {
  std::vector<int64_t> out;
  const int64_t size = pool_size();
  for (int64_t k = pool_position(r) % ep_; k < size; k += ep_) {
    out.push_back(pool_rank(r, k));
  }
  return out;
}

std::vector<int64_t> RankLayout::expert_rail_group(int64_t r) const {
  std::vector<int64_t> ep = expert_group(r);
  if (node_ranks_ <= 0) {
    return ep;
  }
  // The local index of a member: its position among the group's members on its node.
  const auto local = [&](int64_t m) {
    return std::count_if(ep.begin(), ep.end(), [&](int64_t q) {
      return q / node_ranks_ == m / node_ranks_ && q < m;
    });
  };
  const auto mine = local(r);
  std::vector<int64_t> out;
  std::copy_if(ep.begin(), ep.end(), std::back_inserter(out),
               [&](int64_t m) { return local(m) == mine; });
  return out;
}

std::vector<int64_t> RankLayout::expert_node_group(int64_t r) const {
  std::vector<int64_t> ep = expert_group(r);
  if (node_ranks_ <= 0) {
    return ep;
  }
  std::erase_if(ep, [&](int64_t m) { return m / node_ranks_ != r / node_ranks_; });
  return ep;
}

}  // namespace meshsim::workloads
