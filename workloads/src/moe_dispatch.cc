// The EP exchange of an MoE layer (dispatch to the experts, combine back, and their gradients)
// under the plan's dispatcher (parallel.h MoeDispatcher). Conventions in layer_ops.h.
#include <cmath>
#include <string>

#include "layer_items.h"

namespace meshsim::workloads::detail {
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
  SIM_CHECK(c.stage.flex.has_value(), "the flex dispatcher's route of stage {} was not derived",
            c.stage.stage);
  const FlexRoute& r = *c.stage.flex;
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
