#include "json_splitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"

namespace meshsim::traces::detail {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Bytes the container scan stops at: quotes and brackets.
constexpr std::array<bool, 256> kStructural = [] {
  std::array<bool, 256> t{};
  for (const char c : {'"', '{', '}', '[', ']'}) {
    t[static_cast<unsigned char>(c)] = true;
  }
  return t;
}();

std::string describe_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) {
    return fmt::format("'{}'", c);
  }
  return fmt::format("byte 0x{:02x}", u);
}

}  // namespace

JsonSplitter::JsonSplitter(std::string source, SplitterLimits limits, EventFn on_event,
                           HeaderFn on_header)
    : source_(std::move(source)),
      limits_(limits),
      on_event_(std::move(on_event)),
      on_header_(std::move(on_header)) {}

void JsonSplitter::fail(int64_t offset, const std::string& message) const {
  throw InputError(source_, fmt::format("byte {}", offset), message);
}

void JsonSplitter::fail_at(std::string_view chunk, size_t i, const std::string& message) const {
  (void)chunk;
  fail(offset_ + static_cast<int64_t>(i), message);
}

void JsonSplitter::begin_piece(Piece piece, std::string_view chunk, size_t i) {
  piece_ = piece;
  piece_begin_ = i;
  piece_offset_ = offset_ + static_cast<int64_t>(i);
  carry_.clear();
  depth_ = 0;
  in_string_ = false;
  escaped_ = false;
  scalar_ = false;
  const char c = chunk[i];
  if (piece == Piece::kKey) {
    in_string_ = true;  // the opening quote
  } else if (c == '"') {
    in_string_ = true;
  } else if (c == '{' || c == '[') {
    depth_ = 1;
    const int base = piece == Piece::kEvent ? (legacy_ ? 1 : 2) : 1;
    if (base + depth_ > limits_.max_depth) {
      fail_at(chunk, i, fmt::format("nesting deeper than the limit of {} levels",
                                    limits_.max_depth));
    }
  } else {
    scalar_ = true;
  }
}

void JsonSplitter::check_piece_size(size_t consumed) {
  const int64_t size = static_cast<int64_t>(carry_.size() + consumed);
  if (piece_ == Piece::kEvent && size > limits_.max_event_bytes) {
    throw InputSizeError(source_, fmt::format("byte {}", piece_offset_),
                         fmt::format("event {} is longer than the {} limit on one event's text",
                                     events_, describe_limit(limits_.max_event_bytes)));
  }
  if (piece_ != Piece::kEvent && size > limits_.max_header_bytes) {
    throw InputSizeError(
        source_, fmt::format("byte {}", piece_offset_),
        fmt::format("the top-level value {} is longer than the {} limit on one such value",
                    piece_ == Piece::kKey ? "key" : "\"" + key_ + "\"",
                    describe_limit(limits_.max_header_bytes)));
  }
}

// Scans the piece from `i`; returns true when it ended (with `i` just past it).
bool JsonSplitter::scan_piece(std::string_view chunk, size_t& i) {
  const char* p = chunk.data();
  const size_t n = chunk.size();
  if (scalar_) {
    while (i < n && !is_space(p[i]) && p[i] != ',' && p[i] != '}' && p[i] != ']') {
      ++i;
    }
    if (i == n) {
      return false;
    }
    end_piece(chunk, i);
    return true;
  }
  const int base = piece_ == Piece::kEvent ? (legacy_ ? 1 : 2) : 1;
  while (i < n) {
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
        ++i;
        continue;
      }
      while (i < n && p[i] != '"' && p[i] != '\\') {
        ++i;
      }
      if (i == n) {
        return false;
      }
      if (p[i] == '\\') {
        escaped_ = true;
        ++i;
        continue;
      }
      in_string_ = false;
      ++i;
      if (depth_ == 0) {
        end_piece(chunk, i);  // a string piece (a key, or a header value) ends at its quote
        return true;
      }
      continue;
    }
    while (i < n && !kStructural[static_cast<unsigned char>(p[i])]) {
      ++i;
    }
    if (i == n) {
      return false;
    }
    const char c = p[i++];
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      if (++depth_ + base > limits_.max_depth) {
        fail_at(chunk, i - 1,
                fmt::format("nesting deeper than the limit of {} levels", limits_.max_depth));
      }
    } else if (--depth_ == 0) {
      end_piece(chunk, i);
      return true;
    }
  }
  return false;
}

void JsonSplitter::end_piece(std::string_view chunk, size_t end) {
  std::string_view text;
  if (carry_.empty()) {
    text = chunk.substr(piece_begin_, end - piece_begin_);
  } else {
    carry_.reserve(carry_.size() + (end - piece_begin_) + kPadding);
    carry_.append(chunk.substr(piece_begin_, end - piece_begin_));
    text = carry_;
  }
  check_piece_size(carry_.empty() ? text.size() : 0);
  const Piece piece = piece_;
  piece_ = Piece::kNone;
  switch (piece) {
    case Piece::kKey: {
      key_ = std::string(text.substr(1, text.size() - 2));  // without the quotes
      if (std::find(keys_seen_.begin(), keys_seen_.end(), key_) != keys_seen_.end()) {
        fail(piece_offset_, fmt::format("the key \"{}\" appears twice in the top-level object",
                                        key_));
      }
      keys_seen_.push_back(key_);
      state_ = State::kColon;
      break;
    }
    case Piece::kHeader:
      on_header_(key_, text, piece_offset_);
      state_ = State::kMemberEnd;
      break;
    case Piece::kEvent: {
      const int64_t index = events_++;
      on_event_(text, index, piece_offset_);
      state_ = State::kElemEnd;
      break;
    }
    case Piece::kNone:
      break;
  }
  carry_.clear();
}

// One step between pieces: whitespace, a separator, a bracket of the top level, or the start of
// a piece (not consumed: scan_piece reads it).
void JsonSplitter::step_structure(std::string_view chunk, size_t& i) {
  const char c = chunk[i];
  if (is_space(c)) {
    ++i;
    return;
  }
  switch (state_) {
    case State::kStart:
      if (offset_ + static_cast<int64_t>(i) == 0 && chunk.substr(0, 3) == "\xEF\xBB\xBF") {
        i += 3;  // a UTF-8 byte-order mark
        return;
      }
      if (c == '{') {
        state_ = State::kKeyOrClose;
      } else if (c == '[') {
        legacy_ = true;
        in_events_ = true;
        saw_events_ = true;
        state_ = State::kElemOrClose;
      } else {
        fail_at(chunk, i,
                fmt::format("expected a JSON object with \"traceEvents\" (or an array of trace "
                            "events), got {}",
                            describe_byte(c)));
      }
      ++i;
      return;
    case State::kKeyOrClose:
    case State::kKey:
      if (c == '"') {
        begin_piece(Piece::kKey, chunk, i);
        ++i;
        return;
      }
      if (c == '}' && state_ == State::kKeyOrClose) {
        state_ = State::kDone;
        ++i;
        return;
      }
      fail_at(chunk, i, fmt::format("expected a key string in the top-level object, got {}",
                                    describe_byte(c)));
    case State::kColon:
      if (c != ':') {
        fail_at(chunk, i, fmt::format("expected ':' after the key \"{}\", got {}", key_,
                                      describe_byte(c)));
      }
      state_ = State::kValue;
      ++i;
      return;
    case State::kValue:
      if (key_ == "traceEvents") {
        if (c != '[') {
          throw InputError(source_, "/traceEvents",
                           fmt::format("expected an array of events, got {} at byte {}",
                                       describe_byte(c), offset_ + static_cast<int64_t>(i)));
        }
        in_events_ = true;
        saw_events_ = true;
        state_ = State::kElemOrClose;
        ++i;
        return;
      }
      if (c == ',' || c == '}' || c == ']' || c == ':') {
        fail_at(chunk, i, fmt::format("expected the value of \"{}\", got {}", key_,
                                      describe_byte(c)));
      }
      begin_piece(Piece::kHeader, chunk, i);
      if (!scalar_) {
        ++i;  // the opening quote or bracket
      }
      return;
    case State::kMemberEnd:
      if (c == ',') {
        state_ = State::kKey;
      } else if (c == '}') {
        state_ = State::kDone;
      } else {
        fail_at(chunk, i, fmt::format("expected ',' or '}}' after the value of \"{}\", got {}",
                                      key_, describe_byte(c)));
      }
      ++i;
      return;
    case State::kElemOrClose:
    case State::kElem:
      if (c == '{') {
        begin_piece(Piece::kEvent, chunk, i);
        ++i;
        return;
      }
      if (c == ']' && state_ == State::kElemOrClose) {
        in_events_ = false;
        state_ = legacy_ ? State::kDone : State::kMemberEnd;
        ++i;
        return;
      }
      throw InputError(source_,
                       fmt::format("{}/{}", legacy_ ? "" : "/traceEvents", events_),
                       fmt::format("expected an event object, got {} at byte {}",
                                   describe_byte(c), offset_ + static_cast<int64_t>(i)));
    case State::kElemEnd:
      if (c == ',') {
        state_ = State::kElem;
      } else if (c == ']') {
        in_events_ = false;
        state_ = legacy_ ? State::kDone : State::kMemberEnd;
      } else {
        fail_at(chunk, i, fmt::format("expected ',' or ']' after event {}, got {}", events_ - 1,
                                      describe_byte(c)));
      }
      ++i;
      return;
    case State::kDone:
      fail_at(chunk, i, fmt::format("text after the end of the JSON document: {}",
                                    describe_byte(c)));
  }
}

void JsonSplitter::feed(std::string_view chunk) {
  size_t i = 0;
  if (piece_ != Piece::kNone) {
    piece_begin_ = 0;  // the piece goes on from carry_
  }
  while (i < chunk.size()) {
    if (piece_ != Piece::kNone) {
      if (!scan_piece(chunk, i)) {
        break;
      }
      continue;
    }
    step_structure(chunk, i);
  }
  if (piece_ != Piece::kNone) {
    carry_.append(chunk.substr(piece_begin_));
    check_piece_size(0);
  }
  offset_ += static_cast<int64_t>(chunk.size());
}

void JsonSplitter::finish() {
  if (piece_ != Piece::kNone && scalar_) {
    // A bare scalar at the very end cannot end the document: it sits inside the top object.
    piece_ = Piece::kNone;
  }
  if (state_ == State::kStart) {
    fail(offset_, "no JSON document (the text is empty or only whitespace)");
  }
  if (state_ != State::kDone) {
    fail(offset_, fmt::format("the text ends inside the JSON document (truncated?){}",
                              in_events_ ? fmt::format(", after {} events", events_) : ""));
  }
}

}  // namespace meshsim::traces::detail
