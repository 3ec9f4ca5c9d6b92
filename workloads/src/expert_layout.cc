// The expert groups of a rank layout (parallel.h): the EP group, the expert-data-parallel group
// and the flex dispatcher's two hops.
#include <algorithm>
#include <iterator>
#include <vector>

#include "meshsim/workloads/parallel.h"

namespace meshsim::workloads {

std::vector<int64_t> RankLayout::expert_pool(int64_t r) const {
  if (experts_tp_split_) {
    return group_along(r, Axis::kData);
  }
  std::vector<int64_t> stage;
  RankCoords c = coords(r);
  for (c.dp = 0; c.dp < size_[static_cast<size_t>(Axis::kData)]; ++c.dp) {
    for (c.cp = 0; c.cp < size_[static_cast<size_t>(Axis::kContext)]; ++c.cp) {
      for (c.tp = 0; c.tp < size_[static_cast<size_t>(Axis::kTensor)]; ++c.tp) {
        stage.push_back(rank(c));
      }
    }
  }
  std::sort(stage.begin(), stage.end());  // in rank order, as Megatron-Core enumerates them
  return stage;
}

std::vector<int64_t> RankLayout::expert_group(int64_t r) const {
  const std::vector<int64_t> pool = expert_pool(r);
  const auto at = std::find(pool.begin(), pool.end(), r) - pool.begin();
  const int64_t block = at / ep_;
  return {pool.begin() + block * ep_, pool.begin() + (block + 1) * ep_};
}

std::vector<int64_t> RankLayout::expert_dp_group(int64_t r) const {
  const std::vector<int64_t> pool = expert_pool(r);
  const auto at = std::find(pool.begin(), pool.end(), r) - pool.begin();
  std::vector<int64_t> out;
  for (auto k = static_cast<size_t>(at % ep_); k < pool.size(); k += static_cast<size_t>(ep_)) {
    out.push_back(pool[k]);
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
