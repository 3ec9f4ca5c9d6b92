// The EP exchange of an MoE layer (dispatch to the experts, combine back, and their gradients)
// under the plan's dispatcher (parallel.h MoeDispatcher). Conventions in layer_ops.h.
#include <algorithm>
#include <cmath>
#include <string>

#include "layer_items.h"

namespace meshsim::workloads::detail {
namespace {

int64_t count(const std::vector<int64_t>& v) { return static_cast<int64_t>(v.size()); }

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
  r.per_node = count(layout.expert_node_group(0));
  r.nodes = count(layout.expert_rail_group(0));
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

// `tokens` routed tokens (x `exchange`, the busiest rank's share) of d 16-bit values each.
// kAllToAll: one all-to-all over the EP group carrying a copy per (token, expert) pair. kFlex:
// over the network to the same local rank of each destination node, one copy per node reached
// (node_copies; all-to-all over the rail group, whose block to the rank's own node stays home),
// and over NVLink from there to the experts' GPUs, a copy per expert (the node group's
// all-to-all; DeepEP forwards once per GPU, so this is an upper bound when a node holds several
// of a token's experts). To the experts the network hop goes first; back, the NVLink hop. The two
// run in series, while DeepEP's kernels pipeline them: an upper bound of their sum.
void ep_exchange(Items& it, const std::string& name, bool to_experts, int64_t tokens,
                 double exchange) {
  const LayerContext& c = it.context();
  const int64_t h = c.model.d_model;
  const auto bytes = [&](double copies) {
    const double n = static_cast<double>(tokens) * copies * exchange;
    return Bytes::of(std::llround(n) * h * c.plan.activation_bytes);
  };
  const auto k = static_cast<double>(c.model.moe->experts_per_token);
  if (c.plan.moe_dispatcher != MoeDispatcher::kFlex) {
    it.comm(name + ".ep_alltoall", CommKind::kExpert, CollectiveKind::kAllToAll, bytes(k));
    return;
  }
  const FlexRoute r = flex_route(c.model, c.plan);
  const auto internode = [&] {
    if (r.nodes > 1) {
      it.comm(name + ".ep_internode", CommKind::kExpert, CollectiveKind::kAllToAll,
              bytes(r.node_copies), false, GroupSlot::kExpertRail);
    }
  };
  const auto intranode = [&] {
    if (r.per_node > 1) {
      it.comm(name + ".ep_intranode", CommKind::kExpert, CollectiveKind::kAllToAll, bytes(k),
              false, GroupSlot::kExpertNode);
    }
  };
  if (to_experts) {
    internode();
    intranode();
  } else {
    intranode();
    internode();
  }
}

}  // namespace meshsim::workloads::detail
