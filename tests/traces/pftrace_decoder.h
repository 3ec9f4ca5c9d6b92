// Decodes a .pftrace written by TraceWriter (TraceFormat::kPerfetto) with the project's own
// generated classes and rebuilds what a trace processor would: tracks, slices (BEGIN/END pairs),
// flows and counters. Structural problems are collected in `errors` rather than thrown, so a test
// can print them all.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "perfetto_trace.pb.h"

namespace meshsim::traces::test {

namespace pb = ::meshsim::perfetto;

struct DecodedSlice {
  uint64_t track = 0;
  int64_t ts = 0;
  int64_t end = 0;
  std::string name;
  std::string category;
  std::map<std::string, std::string> args;  // values printed with fmt "{}"
  std::vector<uint64_t> flows;              // flow_ids
  std::vector<uint64_t> terminating;        // terminating_flow_ids
};

struct DecodedEvent {
  size_t packet = 0;  // position in the file
  int64_t ts = 0;
  uint64_t track = 0;
  pb::TrackEvent event;
};

struct DecodedTrace {
  std::map<uint64_t, pb::TrackDescriptor> tracks;
  std::vector<DecodedEvent> events;  // in file order
  std::vector<DecodedSlice> slices;  // in order of their BEGIN after sorting by (ts, file order)
  std::map<uint64_t, std::vector<std::pair<int64_t, double>>> counters;  // by track, file order
  std::vector<std::string> errors;
};

inline std::string annotation_value(const pb::DebugAnnotation& a) {
  if (a.has_int_value()) {
    return fmt::format("{}", a.int_value());
  }
  if (a.has_double_value()) {
    return fmt::format("{}", a.double_value());
  }
  return a.string_value();
}

// Replays the sorted events per track like a slice tracker: BEGIN pushes, END pops.
inline void build_slices(DecodedTrace& d, const std::map<uint64_t, std::string>& names,
                         const std::map<uint64_t, std::string>& arg_names,
                         const std::map<uint64_t, std::string>& categories) {
  std::vector<const DecodedEvent*> sorted;
  for (const DecodedEvent& e : d.events) {
    sorted.push_back(&e);
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const DecodedEvent* a, const DecodedEvent* b) { return a->ts < b->ts; });
  std::map<uint64_t, std::vector<size_t>> open;  // track -> stack of slice indices
  for (const DecodedEvent* e : sorted) {
    const pb::TrackEvent& ev = e->event;
    if (ev.type() == pb::TrackEvent::TYPE_SLICE_BEGIN) {
      DecodedSlice s;
      s.track = e->track;
      s.ts = e->ts;
      s.name = ev.has_name_iid() ? names.at(ev.name_iid()) : ev.name();
      for (const uint64_t c : ev.category_iids()) {
        s.category = categories.at(c);
      }
      for (const auto& a : ev.debug_annotations()) {
        s.args[a.has_name_iid() ? arg_names.at(a.name_iid()) : a.name()] = annotation_value(a);
      }
      s.flows.assign(ev.flow_ids().begin(), ev.flow_ids().end());
      s.terminating.assign(ev.terminating_flow_ids().begin(), ev.terminating_flow_ids().end());
      if (!open[e->track].empty()) {
        d.errors.push_back(fmt::format("slice '{}' at {} nests inside another on track {:x}",
                                       s.name, s.ts, e->track));
      }
      open[e->track].push_back(d.slices.size());
      d.slices.push_back(std::move(s));
    } else if (ev.type() == pb::TrackEvent::TYPE_SLICE_END) {
      auto& stack = open[e->track];
      if (stack.empty()) {
        d.errors.push_back(fmt::format("END without BEGIN at {} on track {:x}", e->ts, e->track));
        continue;
      }
      d.slices[stack.back()].end = e->ts;
      stack.pop_back();
    }
  }
  for (const auto& [track, stack] : open) {
    if (!stack.empty()) {
      d.errors.push_back(fmt::format("{} BEGIN without END on track {:x}", stack.size(), track));
    }
  }
}

inline DecodedTrace decode_pftrace(const std::string& bytes) {
  DecodedTrace d;
  pb::Trace trace;
  if (!trace.ParseFromString(bytes)) {
    d.errors.push_back("not a valid Trace message");
    return d;
  }
  std::map<uint64_t, std::string> names;
  std::map<uint64_t, std::string> arg_names;
  std::map<uint64_t, std::string> categories;
  std::map<uint64_t, int64_t> last_ts;  // per track, file order
  for (size_t i = 0; i < static_cast<size_t>(trace.packet_size()); ++i) {
    const pb::TracePacket& p = trace.packet(static_cast<int>(i));
    if (p.trusted_packet_sequence_id() != 1) {
      d.errors.push_back(
          fmt::format("packet {} is on sequence {}", i, p.trusted_packet_sequence_id()));
    }
    if (i == 0 && p.sequence_flags() != pb::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED) {
      d.errors.push_back("the first packet does not clear incremental state");
    }
    for (const auto& n : p.interned_data().event_names()) {
      names[n.iid()] = n.name();
    }
    for (const auto& n : p.interned_data().debug_annotation_names()) {
      arg_names[n.iid()] = n.name();
    }
    for (const auto& n : p.interned_data().event_categories()) {
      categories[n.iid()] = n.name();
    }
    if (p.has_track_descriptor()) {
      d.tracks[p.track_descriptor().uuid()] = p.track_descriptor();
    }
    if (!p.has_track_event()) {
      continue;
    }
    const pb::TrackEvent& ev = p.track_event();
    const auto ts = static_cast<int64_t>(p.timestamp());
    if (!d.tracks.contains(ev.track_uuid())) {
      d.errors.push_back(fmt::format("packet {}: event before its track {:x}", i, ev.track_uuid()));
    }
    if (last_ts.contains(ev.track_uuid()) && ts < last_ts[ev.track_uuid()]) {
      d.errors.push_back(
          fmt::format("packet {}: time goes back on track {:x}", i, ev.track_uuid()));
    }
    last_ts[ev.track_uuid()] = ts;
    if (ev.has_name_iid() && !names.contains(ev.name_iid())) {
      d.errors.push_back(
          fmt::format("packet {}: name iid {} used before interned", i, ev.name_iid()));
    }
    if (ev.type() == pb::TrackEvent::TYPE_COUNTER) {
      const double v = ev.has_counter_value() ? static_cast<double>(ev.counter_value())
                                              : ev.double_counter_value();
      d.counters[ev.track_uuid()].emplace_back(ts, v);
    }
    d.events.push_back(DecodedEvent{i, ts, ev.track_uuid(), ev});
  }
  build_slices(d, names, arg_names, categories);
  return d;
}

}  // namespace meshsim::traces::test
