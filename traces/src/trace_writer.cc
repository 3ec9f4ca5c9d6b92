#include "meshsim/traces/trace_writer.h"

#include "meshsim/sim/timeline.h"
#include "trace_builder.h"
#include "trace_sink.h"

namespace meshsim::traces {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::unique_ptr<TraceSink> make_sink(TraceFormat format, std::ostream& out) {
  switch (format) {
    case TraceFormat::kPerfetto:
      return make_perfetto_sink(out);
    case TraceFormat::kChromeJson:
      break;
  }
  return make_chrome_json_sink(out);
}

}  // namespace

std::optional<TraceFormat> trace_format_for_path(std::string_view path) {
  if (ends_with(path, ".pftrace")) {
    return TraceFormat::kPerfetto;
  }
  if (ends_with(path, ".json")) {
    return TraceFormat::kChromeJson;
  }
  return std::nullopt;
}

struct TraceWriter::Impl {
  std::unique_ptr<TraceSink> sink;
  TraceBuilder builder;
  Impl(TraceFormat format, const Simulation& sim, std::ostream& out, TraceOptions options)
      : sink(make_sink(format, out)), builder(sim, *sink, std::move(options)) {}
};

TraceWriter::TraceWriter(TraceFormat format, Simulation& sim, std::ostream& out,
                         TraceOptions options, TraceFeed feed)
    : impl_(std::make_unique<Impl>(format, sim, out, std::move(options))) {
  if (feed == TraceFeed::kSubscribe) {
    impl_->builder.subscribe_to(sim);
  }
}

TraceWriter::~TraceWriter() = default;

void TraceWriter::record_op(const OpRecord& record) { impl_->builder.record_op(record); }
void TraceWriter::record_ops(std::vector<OpRecord> records) {
  sort_by_completion(records);
  for (const OpRecord& r : records) {
    record_op(r);
  }
}
void TraceWriter::record_memory(const MemoryRecord& record) {
  impl_->builder.record_memory(record);
}
void TraceWriter::add_counter_sample(std::string_view track, SimTime time, double value) {
  impl_->builder.add_counter_sample(track, time, value);
}
void TraceWriter::finish() { impl_->builder.finish(); }
uint64_t TraceWriter::events_written() const { return impl_->sink->events(); }

}  // namespace meshsim::traces
