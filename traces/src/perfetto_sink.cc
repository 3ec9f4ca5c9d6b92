// The native Perfetto sink (trace_writer.h describes the encoding).
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <optional>
#include <string>
#include <unordered_map>

#include "meshsim/sim/error.h"
#include "perfetto_trace.pb.h"
#include "trace_sink.h"

namespace meshsim::traces {
namespace {

namespace pb = ::meshsim::perfetto;

constexpr uint32_t kSequenceId = 1;
constexpr int kStreamBlockBytes = 256 * 1024;
constexpr uint32_t kTracePacketTag = 0x0A;  // Trace.packet: field 1, wire type 2

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

// Renders the trace model as TracePackets. One TracePacket object is reused for every packet:
// Clear() keeps the sub-messages and strings it allocated, so the steady state allocates nothing.
// Packets go through one CodedOutputStream (deterministic serialization) over the std::ostream,
// buffered in 256 KiB blocks.
class PerfettoSink final : public TraceSink {
 public:
  explicit PerfettoSink(std::ostream& out) : out_(out) {
    raw_.emplace(&out_, kStreamBlockBytes);
    coded_.emplace(&*raw_);
    coded_->SetSerializationDeterministic(true);
  }

  void begin() override;
  void add_process(const ProcessTrack& track) override;
  void add_thread(const ThreadTrack& track) override;
  void add_counter(const CounterTrack& track) override;
  void write_metadata(const ProcessTrack& track, MetadataList metadata) override;
  void write_slice(const ThreadTrack& track, const SliceContent& slice) override;
  void write_counter(const CounterTrack& track, const CounterSample& sample) override;
  void end(MetadataList metadata) override;
  uint64_t events() const override { return packets_; }

 private:
  pb::TracePacket& start_packet(uint32_t flags = 0);
  pb::TrackEvent& start_event(SimTime t, uint64_t track_uuid, pb::TrackEvent::Type type);
  uint64_t name_iid(std::string_view name);
  void emit();

  std::ostream& out_;
  std::optional<google::protobuf::io::OstreamOutputStream> raw_;
  std::optional<google::protobuf::io::CodedOutputStream> coded_;
  pb::TracePacket packet_;
  std::unordered_map<std::string, uint64_t, StringHash, std::equal_to<>> name_iids_;
  uint64_t packets_ = 0;
};

pb::TracePacket& PerfettoSink::start_packet(uint32_t flags) {
  packet_.Clear();
  packet_.set_trusted_packet_sequence_id(kSequenceId);
  if (flags != 0) {
    packet_.set_sequence_flags(flags);
  }
  return packet_;
}

pb::TrackEvent& PerfettoSink::start_event(SimTime t, uint64_t track_uuid,
                                          pb::TrackEvent::Type type) {
  start_packet(pb::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
  packet_.set_timestamp(static_cast<uint64_t>(to_trace_ns(t)));
  pb::TrackEvent& ev = *packet_.mutable_track_event();
  ev.set_type(type);
  ev.set_track_uuid(track_uuid);
  return ev;
}

// The interning id of an event name, adding it to the current packet's InternedData when new.
uint64_t PerfettoSink::name_iid(std::string_view name) {
  if (auto it = name_iids_.find(name); it != name_iids_.end()) {
    return it->second;
  }
  const uint64_t iid = name_iids_.size() + 1;  // 0 is "not set"
  name_iids_.emplace(std::string(name), iid);
  pb::EventName* e = packet_.mutable_interned_data()->add_event_names();
  e->set_iid(iid);
  e->mutable_name()->assign(name.data(), name.size());
  return iid;
}

// Appends the packet as one `Trace.packet` field: tag, varint length, bytes.
void PerfettoSink::emit() {
  const size_t size = packet_.ByteSizeLong();
  coded_->WriteTag(kTracePacketTag);
  coded_->WriteVarint64(size);
  packet_.SerializeWithCachedSizes(&*coded_);
  SIM_CHECK(!coded_->HadError(), "cannot write the trace ({} packets written)", packets_);
  ++packets_;
}

// First packet: clears incremental state, interns arg names and categories, and asks for
// explicit process and thread ordering on the root track (uuid 0).
void PerfettoSink::begin() {
  start_packet(pb::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
  packet_.set_first_packet_on_sequence(true);
  pb::InternedData& interned = *packet_.mutable_interned_data();
  for (int k = 0; k < kNumArgKeys; ++k) {
    pb::DebugAnnotationName* n = interned.add_debug_annotation_names();
    n->set_iid(static_cast<uint64_t>(k) + 1);
    n->set_name(std::string(arg_name(static_cast<ArgKey>(k))));
  }
  for (int c = 0; c < kNumSliceCategories; ++c) {
    pb::EventCategory* e = interned.add_event_categories();
    e->set_iid(static_cast<uint64_t>(c) + 1);
    e->set_name(std::string(to_string(static_cast<SliceCategory>(c))));
  }
  pb::TrackDescriptor& root = *packet_.mutable_track_descriptor();
  root.set_uuid(0);
  root.set_process_ordering(pb::TrackDescriptor::PROCESS_ORDERING_EXPLICIT);
  root.set_thread_ordering(pb::TrackDescriptor::THREAD_ORDERING_EXPLICIT);
  emit();
}

void PerfettoSink::add_process(const ProcessTrack& track) {
  pb::TrackDescriptor& d = *start_packet().mutable_track_descriptor();
  d.set_uuid(track.uuid);
  d.set_name(track.name);
  d.set_sibling_order_rank(track.sort_rank);
  pb::ProcessDescriptor& p = *d.mutable_process();
  p.set_pid(track.pid);
  p.set_process_name(track.name);
  emit();
}

void PerfettoSink::add_thread(const ThreadTrack& track) {
  pb::TrackDescriptor& d = *start_packet().mutable_track_descriptor();
  d.set_uuid(track.uuid);
  d.set_name(track.name);
  d.set_sibling_order_rank(track.sort_rank);
  pb::ThreadDescriptor& t = *d.mutable_thread();
  t.set_pid(track.pid);
  t.set_tid(track.tid);
  t.set_thread_name(track.name);
  emit();
}

void PerfettoSink::add_counter(const CounterTrack& track) {
  pb::TrackDescriptor& d = *start_packet().mutable_track_descriptor();
  d.set_uuid(track.uuid);
  d.set_parent_uuid(track.process_uuid);
  d.set_name(track.name);
  d.mutable_counter()->set_unit(track.unit == CounterUnit::kBytes
                                    ? pb::CounterDescriptor::UNIT_SIZE_BYTES
                                    : pb::CounterDescriptor::UNIT_UNSPECIFIED);
  emit();
}

void PerfettoSink::write_metadata(const ProcessTrack& track, MetadataList metadata) {
  pb::TrackEvent& ev = start_event(SimTime::zero(), track.uuid, pb::TrackEvent::TYPE_INSTANT);
  ev.set_name("scenario");
  for (const auto& [key, value] : metadata) {
    pb::DebugAnnotation* a = ev.add_debug_annotations();
    a->set_name(key);
    a->set_string_value(value);
  }
  emit();
}

void PerfettoSink::write_slice(const ThreadTrack& track, const SliceContent& slice) {
  pb::TrackEvent& ev = start_event(slice.start, track.uuid, pb::TrackEvent::TYPE_SLICE_BEGIN);
  ev.set_name_iid(name_iid(slice.name));
  ev.add_category_iids(static_cast<uint64_t>(slice.category) + 1);
  for (const Arg& arg : slice.arg_list()) {
    pb::DebugAnnotation* a = ev.add_debug_annotations();
    a->set_name_iid(static_cast<uint64_t>(arg.key) + 1);
    switch (arg.kind) {
      case Arg::Kind::kInt:
        a->set_int_value(arg.int_value);
        break;
      case Arg::Kind::kDouble:
        a->set_double_value(arg.double_value);
        break;
      case Arg::Kind::kString:
        a->mutable_string_value()->assign(arg.string_value.data(), arg.string_value.size());
        break;
    }
  }
  if (slice.flow == FlowRole::kBegin || slice.flow == FlowRole::kStep) {
    ev.add_flow_ids(slice.flow_id);
  } else if (slice.flow == FlowRole::kEnd) {
    ev.add_terminating_flow_ids(slice.flow_id);
  }
  emit();
  start_event(slice.end, track.uuid, pb::TrackEvent::TYPE_SLICE_END);
  emit();
}

void PerfettoSink::write_counter(const CounterTrack& track, const CounterSample& sample) {
  pb::TrackEvent& ev = start_event(sample.time, track.uuid, pb::TrackEvent::TYPE_COUNTER);
  if (sample.integral) {
    ev.set_counter_value(sample.int_value);
  } else {
    ev.set_double_counter_value(sample.double_value);
  }
  emit();
}

void PerfettoSink::end(MetadataList /*metadata*/) {
  coded_.reset();  // gives its unused buffer space back to raw_
  raw_.reset();    // writes what raw_ buffered to out_
  out_.flush();
}

}  // namespace

std::unique_ptr<TraceSink> make_perfetto_sink(std::ostream& out) {
  return std::make_unique<PerfettoSink>(out);
}

}  // namespace meshsim::traces
