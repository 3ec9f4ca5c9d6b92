#include "meshsim/sim/program.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>

#include <algorithm>
#include <iterator>

#include "meshsim/sim/error.h"

namespace meshsim {

ComputeWork matmul_work(const MatmulShape& s, Dtype dtype, int64_t out_bytes) {
  ComputeWork w;
  w.op_class = OpClass::kMatmul;
  w.dtype = dtype;
  w.flops = Flops::of(2.0 * static_cast<double>(s.m) * static_cast<double>(s.k) *
                      static_cast<double>(s.n) * static_cast<double>(s.batch));
  w.bytes = Bytes::of(s.batch *
                      ((s.m * s.k + s.k * s.n) * bytes_per_element(dtype) + s.m * s.n * out_bytes));
  w.shape = s;
  return w;
}

int64_t bytes_per_element(Dtype d) {
  switch (d) {
    case Dtype::kFp32:
    case Dtype::kTf32:
      return 4;
    case Dtype::kBf16:
    case Dtype::kFp16:
      return 2;
    case Dtype::kFp8:
      return 1;
  }
  return 4;
}

OpKind Op::kind() const {
  if (std::holds_alternative<ComputeWork>(work)) {
    return OpKind::kCompute;
  }
  if (std::holds_alternative<CollectiveWork>(work)) {
    return OpKind::kCollective;
  }
  return is_send ? OpKind::kSend : OpKind::kRecv;
}

struct Program::Impl {
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, Op>;
  Graph graph;
  std::vector<std::pair<MemoryCategory, Bytes>> initial_memory;
  uint8_t num_streams = 1;
};

Program::Program() : impl_(std::make_unique<Impl>()) {}
Program::~Program() = default;
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;

OpId Program::add(Op op) {
  SIM_CHECK(op.stream < 64, "op '{}' names stream {}; at most 64 streams", op.name, op.stream);
  // At most 100 ms an op, so that the host times of kMaxOps ops sum within int64 picoseconds.
  SIM_CHECK(op.host >= Duration::zero() && op.host <= Milliseconds(100),
            "op '{}': host time {} ps is not within [0, 100 ms]", op.name, op.host.ps());
  if (size() >= kMaxOps) {
    throw LimitError(fmt::format("a program of more than {} ops (2^24): too large to simulate in "
                                 "a minute (the default step's programs hold a few thousand)",
                                 kMaxOps));
  }
  impl_->num_streams = std::max<uint8_t>(impl_->num_streams, static_cast<uint8_t>(op.stream + 1));
  const auto v = boost::add_vertex(std::move(op), impl_->graph);
  return OpId(static_cast<uint32_t>(v));
}

void Program::reserve(size_t ops) {
  // adjacency_list's vertex storage (vecS) is the public std::vector m_vertices of its
  // vec_adj_list_impl base (boost/graph/detail/adjacency_list.hpp).
  impl_->graph.m_vertices.reserve(std::min(ops, kMaxOps));
}

void Program::add_dependency(OpId before, OpId after) {
  SIM_CHECK(after.index() < size(), "dependency on op {} of a program of {} ops", after.value(),
            size());
  SIM_CHECK(before < after, "dependency {} -> {} does not point forward in program order",
            before.value(), after.value());
  boost::add_edge(before.index(), after.index(), impl_->graph);
}

void Program::set_host_sync(OpId id, HostSync sync) {
  SIM_CHECK(id.index() < size(), "op {} of a program of {} ops", id.value(), size());
  impl_->graph[id.index()].host_sync = sync;
}

void Program::set_initial_memory(MemoryCategory category, Bytes bytes) {
  SIM_CHECK(bytes >= Bytes::zero(), "negative initial {} memory", to_string(category));
  impl_->initial_memory.emplace_back(category, bytes);
}

size_t Program::size() const { return boost::num_vertices(impl_->graph); }

const Op& Program::op(OpId id) const {
  SIM_CHECK(id.index() < size(), "op {} of a program of {} ops", id.value(), size());
  return impl_->graph[id.index()];
}

std::vector<OpId> Program::successors(OpId id) const {
  std::vector<OpId> out;
  for (auto [it, end] = boost::adjacent_vertices(id.index(), impl_->graph); it != end; ++it) {
    out.emplace_back(static_cast<uint32_t>(*it));
  }
  return out;
}

std::vector<OpId> Program::predecessors(OpId id) const {
  std::vector<OpId> out;
  for (auto [it, end] = boost::inv_adjacent_vertices(id.index(), impl_->graph); it != end; ++it) {
    out.emplace_back(static_cast<uint32_t>(*it));
  }
  return out;
}

size_t Program::num_dependencies() const { return boost::num_edges(impl_->graph); }

std::vector<OpId> Program::topological_order() const {
  std::vector<Impl::Graph::vertex_descriptor> reversed;
  boost::topological_sort(impl_->graph, std::back_inserter(reversed));
  std::vector<OpId> out;
  out.reserve(reversed.size());
  for (auto it = reversed.rbegin(); it != reversed.rend(); ++it) {
    out.emplace_back(static_cast<uint32_t>(*it));
  }
  return out;
}

const std::vector<std::pair<MemoryCategory, Bytes>>& Program::initial_memory() const {
  return impl_->initial_memory;
}

uint8_t Program::num_streams() const { return impl_->num_streams; }

}  // namespace meshsim
