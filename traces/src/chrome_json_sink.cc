// The Chrome JSON sink (trace_writer.h describes the encoding).
#include <fmt/format.h>

#include <iterator>

#include "meshsim/sim/error.h"
#include "meshsim/traces/trace_writer.h"
#include "trace_sink.h"

namespace meshsim::traces {
namespace {

constexpr size_t kFlushBytes = 256 * 1024;

using Buffer = fmt::memory_buffer;

void append_us(Buffer& b, int64_t ps) {
  const bool negative = ps < 0;
  const uint64_t mag = negative ? static_cast<uint64_t>(-(ps + 1)) + 1 : static_cast<uint64_t>(ps);
  fmt::format_to(std::back_inserter(b), "{}{}.{:06}", negative ? "-" : "", mag / 1'000'000,
                 mag % 1'000'000);
}

// A JSON string literal. Bytes >= 0x20 other than '"' and '\\' pass through (UTF-8 stays UTF-8).
void append_string(Buffer& b, std::string_view s) {
  b.push_back('"');
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      b.push_back('\\');
      b.push_back(c);
    } else if (u < 0x20) {
      fmt::format_to(std::back_inserter(b), "\\u{:04x}", static_cast<unsigned>(u));
    } else {
      b.push_back(c);
    }
  }
  b.push_back('"');
}

void append_arg_value(Buffer& b, const Arg& a) {
  switch (a.kind) {
    case Arg::Kind::kInt:
      fmt::format_to(std::back_inserter(b), "{}", a.int_value);
      break;
    case Arg::Kind::kDouble:
      fmt::format_to(std::back_inserter(b), "{:.{}f}", a.double_value, arg_decimals(a.key));
      break;
    case Arg::Kind::kString:
      append_string(b, a.string_value);
      break;
  }
}

// Splits a counter track name at its last space: (event name, arg key).
std::pair<std::string_view, std::string_view> split_counter_name(std::string_view name) {
  const size_t space = name.rfind(' ');
  if (space == std::string_view::npos || space == 0 || space + 1 == name.size()) {
    return {name, "value"};
  }
  return {name.substr(0, space), name.substr(space + 1)};
}

std::string_view flow_phase(FlowRole role) {
  switch (role) {
    case FlowRole::kBegin:
      return "s";
    case FlowRole::kStep:
      return "t";
    case FlowRole::kEnd:
      return "f";
    case FlowRole::kNone:
      break;
  }
  return "";
}

class ChromeJsonSink final : public TraceSink {
 public:
  explicit ChromeJsonSink(std::ostream& out) : out_(out) {}

  void begin() override {
    fmt::format_to(std::back_inserter(buf_), R"({{"displayTimeUnit":"ns","traceEvents":[)");
  }
  void add_process(const ProcessTrack& track) override;
  void add_thread(const ThreadTrack& track) override;
  void add_counter(const CounterTrack& /*track*/) override {}
  void write_metadata(const ProcessTrack& track, MetadataList metadata) override;
  void write_slice(const ThreadTrack& track, const SliceContent& slice) override;
  void write_counter(const CounterTrack& track, const CounterSample& sample) override;
  void end(MetadataList metadata) override;
  uint64_t events() const override { return events_; }

 private:
  // Starts the next element of "traceEvents".
  Buffer& next_event() {
    buf_.append(std::string_view(events_++ == 0 ? "\n" : ",\n"));
    return buf_;
  }
  void done_event() {
    if (buf_.size() >= kFlushBytes) {
      flush();
    }
  }
  void flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }

  std::ostream& out_;
  Buffer buf_;
  uint64_t events_ = 0;
};

void ChromeJsonSink::add_process(const ProcessTrack& track) {
  Buffer& b = next_event();
  fmt::format_to(std::back_inserter(b),
                 R"({{"ph":"M","pid":{},"name":"process_name","args":{{"name":)", track.pid);
  append_string(b, track.name);
  b.append(std::string_view("}}"));
  fmt::format_to(std::back_inserter(next_event()),
                 R"({{"ph":"M","pid":{},"name":"process_sort_index","args":{{"sort_index":{}}}}})",
                 track.pid, track.sort_rank);
  done_event();
}

void ChromeJsonSink::add_thread(const ThreadTrack& track) {
  Buffer& b = next_event();
  fmt::format_to(std::back_inserter(b),
                 R"({{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":)", track.pid,
                 track.tid);
  append_string(b, track.name);
  b.append(std::string_view("}}"));
  fmt::format_to(
      std::back_inserter(next_event()),
      R"({{"ph":"M","pid":{},"tid":{},"name":"thread_sort_index","args":{{"sort_index":{}}}}})",
      track.pid, track.tid, track.sort_rank);
  done_event();
}

void ChromeJsonSink::write_metadata(const ProcessTrack& track, MetadataList metadata) {
  Buffer& b = next_event();
  fmt::format_to(std::back_inserter(b),
                 R"({{"ph":"i","s":"p","pid":{},"ts":0.000000,"name":"scenario","args":{{)",
                 track.pid);
  for (size_t i = 0; i < metadata.size(); ++i) {
    if (i > 0) {
      b.push_back(',');
    }
    append_string(b, metadata[i].first);
    b.push_back(':');
    append_string(b, metadata[i].second);
  }
  b.append(std::string_view("}}"));
  done_event();
}

void ChromeJsonSink::write_slice(const ThreadTrack& track, const SliceContent& slice) {
  Buffer& b = next_event();
  fmt::format_to(std::back_inserter(b), R"({{"ph":"X","pid":{},"tid":{},"ts":)", track.pid,
                 track.tid);
  append_us(b, slice.start.ps());
  b.append(std::string_view(R"(,"dur":)"));
  append_us(b, (slice.end - slice.start).ps());
  b.append(std::string_view(R"(,"cat":")"));
  b.append(to_string(slice.category));
  b.append(std::string_view(R"(","name":)"));
  append_string(b, slice.name);
  b.append(std::string_view(R"(,"args":{)"));
  const auto args = slice.arg_list();
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0) {
      b.push_back(',');
    }
    b.push_back('"');
    b.append(arg_name(args[i].key));
    b.append(std::string_view("\":"));
    append_arg_value(b, args[i]);
  }
  b.append(std::string_view("}}"));
  if (slice.flow != FlowRole::kNone) {
    Buffer& f = next_event();
    fmt::format_to(std::back_inserter(f), R"({{"ph":"{}","id":{},"pid":{},"tid":{},"ts":)",
                   flow_phase(slice.flow), slice.flow_id, track.pid, track.tid);
    append_us(f, slice.start.ps());
    fmt::format_to(std::back_inserter(f), R"(,"cat":"flow","name":"{}","bp":"e"}})",
                   slice.category == SliceCategory::kP2P ? "p2p" : "collective");
  }
  done_event();
}

void ChromeJsonSink::write_counter(const CounterTrack& track, const CounterSample& sample) {
  const auto [name, key] = split_counter_name(track.name);
  Buffer& b = next_event();
  fmt::format_to(std::back_inserter(b), R"({{"ph":"C","pid":{},"ts":)", track.pid);
  append_us(b, sample.time.ps());
  b.append(std::string_view(R"(,"name":)"));
  append_string(b, name);
  b.append(std::string_view(R"(,"args":{)"));
  append_string(b, key);
  b.push_back(':');
  if (sample.integral) {
    fmt::format_to(std::back_inserter(b), "{}", sample.int_value);
  } else {
    fmt::format_to(std::back_inserter(b), "{:.6f}", sample.double_value);
  }
  b.append(std::string_view("}}"));
  done_event();
}

void ChromeJsonSink::end(MetadataList metadata) {
  buf_.append(std::string_view("\n],\"metadata\":{"));
  for (size_t i = 0; i < metadata.size(); ++i) {
    if (i > 0) {
      buf_.push_back(',');
    }
    append_string(buf_, metadata[i].first);
    buf_.push_back(':');
    append_string(buf_, metadata[i].second);
  }
  buf_.append(std::string_view("}}\n"));
  flush();
  out_.flush();
}

}  // namespace

std::string format_us(SimTime t) {
  Buffer b;
  append_us(b, t.ps());
  return fmt::to_string(b);
}

std::string format_us(Duration d) {
  Buffer b;
  append_us(b, d.ps());
  return fmt::to_string(b);
}

std::unique_ptr<TraceSink> make_chrome_json_sink(std::ostream& out) {
  return std::make_unique<ChromeJsonSink>(out);
}

}  // namespace meshsim::traces
