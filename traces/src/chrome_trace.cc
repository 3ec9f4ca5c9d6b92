#include "meshsim/traces/chrome_trace.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <map>
#include <set>

#include "meshsim/sim/error.h"

namespace meshsim::traces {
namespace {

std::string format_ps_as_us(int64_t ps) {
  const bool negative = ps < 0;
  const uint64_t mag = negative ? static_cast<uint64_t>(-(ps + 1)) + 1 : static_cast<uint64_t>(ps);
  return fmt::format("{}{}.{:06}", negative ? "-" : "", mag / 1'000'000, mag % 1'000'000);
}

std::string json_string(const std::string& s) { return nlohmann::json(s).dump(); }

std::string stream_name(uint8_t stream) {
  return stream == 0 ? std::string("compute") : fmt::format("comm {}", stream);
}

}  // namespace

std::string format_us(SimTime t) { return format_ps_as_us(t.ps()); }
std::string format_us(Duration d) { return format_ps_as_us(d.ps()); }

struct ChromeTraceWriter::Impl {
  Simulation& sim;
  std::ostream& out;
  ChromeTraceOptions options;
  std::set<std::pair<uint32_t, uint8_t>> threads_seen;  // ordered: deterministic metadata
  uint64_t events = 0;
  bool finished = false;

  Impl(Simulation& s, std::ostream& o, ChromeTraceOptions opts)
      : sim(s), out(o), options(std::move(opts)) {}

  bool wanted(RankId r) const { return !options.include_rank || options.include_rank(r); }
  void separator() { out << (events++ == 0 ? "\n" : ",\n"); }
  void write_op(const OpRecord& r);
  void write_memory(const MemoryRecord& r);
};

void ChromeTraceWriter::Impl::write_op(const OpRecord& r) {
  if (!wanted(r.rank)) {
    return;
  }
  threads_seen.emplace(r.rank.value(), r.stream);
  const Op& op = sim.program_of(r.rank).op(r.op);
  std::string args;
  if (const auto* c = std::get_if<ComputeWork>(&op.work)) {
    args = fmt::format(R"("class":"{}","flops":{:.0f},"bytes":{})", to_string(c->op_class),
                       c->flops.count(), c->bytes.count());
  } else if (const auto* w = std::get_if<CollectiveWork>(&op.work)) {
    args = fmt::format(R"("class":"communication","collective":"{}","bytes":{})",
                       to_string(w->kind), w->bytes.count());
  } else {
    const auto& p = std::get<PeerWork>(op.work);
    args = fmt::format(R"("class":"communication","{}":true,"bytes":{})",
                       op.is_send ? "send" : "recv", p.bytes.count());
  }
  if (op.labels.layer) {
    args += fmt::format(R"(,"layer":{})", *op.labels.layer);
  }
  if (op.labels.microbatch) {
    args += fmt::format(R"(,"microbatch":{})", *op.labels.microbatch);
  }
  if (r.start > r.ready) {
    args += fmt::format(R"(,"waited_us":{})", format_us(r.start - r.ready));
  }
  separator();
  out << fmt::format(R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":{},"args":{{{}}}}})",
                     r.rank.value(), r.stream, format_us(r.start), format_us(r.end - r.start),
                     json_string(op.name), args);
}

void ChromeTraceWriter::Impl::write_memory(const MemoryRecord& r) {
  if (!wanted(r.rank)) {
    return;
  }
  separator();
  out << fmt::format(R"({{"ph":"C","pid":{},"ts":{},"name":"memory","args":{{"GiB":{:.6f}}}}})",
                     r.rank.value(), format_us(r.time),
                     r.total_after.as_double() / (1024.0 * 1024.0 * 1024.0));
}

ChromeTraceWriter::ChromeTraceWriter(Simulation& sim, std::ostream& out,
                                     ChromeTraceOptions options)
    : impl_(std::make_unique<Impl>(sim, out, std::move(options))) {
  out << R"({"displayTimeUnit":"ns","traceEvents":[)";
  Impl* impl = impl_.get();
  sim.on_op_end([impl](const OpRecord& r) { impl->write_op(r); });
  sim.on_memory([impl](const MemoryRecord& r) { impl->write_memory(r); });
}

ChromeTraceWriter::~ChromeTraceWriter() = default;

void ChromeTraceWriter::finish() {
  Impl& s = *impl_;
  SIM_CHECK(!s.finished, "ChromeTraceWriter::finish called twice");
  s.finished = true;
  std::set<uint32_t> ranks;
  for (const auto& [rank, stream] : s.threads_seen) {
    ranks.insert(rank);
    s.separator();
    s.out << fmt::format(R"({{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":"{}"}}}})",
                         rank, stream, stream_name(stream));
  }
  for (const uint32_t rank : ranks) {
    const std::string name = s.options.rank_name ? s.options.rank_name(RankId(rank))
                                                 : fmt::format("rank {}", rank);
    s.separator();
    s.out << fmt::format(R"({{"ph":"M","pid":{},"name":"process_name","args":{{"name":{}}}}})",
                         rank, json_string(name));
    s.separator();
    s.out << fmt::format(R"({{"ph":"M","pid":{},"name":"process_sort_index","args":{{"sort_index":{}}}}})",
                         rank, rank);
  }
  s.out << "\n],\"metadata\":{";
  for (size_t i = 0; i < s.options.metadata.size(); ++i) {
    const auto& [k, v] = s.options.metadata[i];
    s.out << (i ? "," : "") << json_string(k) << ":" << json_string(v);
  }
  s.out << "}}\n";
}

uint64_t ChromeTraceWriter::events_written() const { return impl_->events; }

}  // namespace meshsim::traces
