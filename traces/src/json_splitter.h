// Cuts a Chrome trace's JSON text, fed in chunks of any size, into the pieces a streaming reader
// parses one at a time: each top-level value (with its key) and each element of "traceEvents" (or
// of a bare top-level array, the legacy format). It knows JSON's containers, strings and commas,
// not its scalars: each piece is handed over as text, whole, for a real parser to check.
//
// What it checks itself: the document is one object or array (after optional whitespace and a
// UTF-8 byte-order mark), keys are strings followed by ':', members and elements are separated by
// exactly one ',', brackets match, nothing but whitespace follows the document, the text does not
// end inside it, nesting stays within `max_depth`, and no piece is longer than its limit. Each
// error is an InputError(source, "byte N", ...) with N the offset in the text.
//
// Complexity: one pass over the bytes; memory: the piece being cut when it spans chunks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace meshsim::traces::detail {

struct SplitterLimits {
  int64_t max_event_bytes = 0;
  int64_t max_header_bytes = 0;
  int max_depth = 0;
};

class JsonSplitter {
 public:
  // `text` stays valid until the callback returns, and is followed by at least kPadding readable
  // bytes (simdjson reads past a document's end). `offset` is the piece's first byte in the text.
  using EventFn = std::function<void(std::string_view text, int64_t index, int64_t offset)>;
  using HeaderFn =
      std::function<void(const std::string& key, std::string_view text, int64_t offset)>;
  static constexpr size_t kPadding = 64;

  JsonSplitter(std::string source, SplitterLimits limits, EventFn on_event, HeaderFn on_header);

  // `chunk` must be followed by kPadding readable bytes.
  void feed(std::string_view chunk);
  // The end of the text: InputError when it ends inside the document or holds none.
  void finish();

  bool legacy_array() const { return legacy_; }
  bool saw_events() const { return saw_events_; }
  int64_t events() const { return events_; }
  int64_t bytes() const { return offset_; }

 private:
  enum class State : uint8_t {
    kStart,        // before the document
    kKeyOrClose,   // after '{' of the top object
    kKey,          // after ',' in the top object
    kColon,        // after a key
    kValue,        // after ':'
    kMemberEnd,    // after a value: ',' or '}'
    kElemOrClose,  // after '[' of the event array
    kElem,         // after ',' in the event array
    kElemEnd,      // after an element: ',' or ']'
    kDone,         // after the document
  };
  enum class Piece : uint8_t { kNone, kKey, kHeader, kEvent };

  void step_structure(std::string_view chunk, size_t& i);
  bool scan_piece(std::string_view chunk, size_t& i);
  void begin_piece(Piece piece, std::string_view chunk, size_t i);
  void end_piece(std::string_view chunk, size_t end);
  void check_piece_size(size_t consumed);
  [[noreturn]] void fail(int64_t offset, const std::string& message) const;
  [[noreturn]] void fail_at(std::string_view chunk, size_t i, const std::string& message) const;

  std::string source_;
  SplitterLimits limits_;
  EventFn on_event_;
  HeaderFn on_header_;

  State state_ = State::kStart;
  bool legacy_ = false;
  bool saw_events_ = false;
  bool in_events_ = false;  // the elements being split are events
  int64_t events_ = 0;
  int64_t offset_ = 0;      // text consumed before the current chunk
  std::string key_;         // the current top-level key
  std::vector<std::string> keys_seen_;

  // The piece being cut.
  Piece piece_ = Piece::kNone;
  int64_t piece_offset_ = 0;
  size_t piece_begin_ = 0;  // in the current chunk
  std::string carry_;       // its bytes from earlier chunks
  int depth_ = 0;           // open brackets inside the piece
  bool in_string_ = false;
  bool escaped_ = false;
  bool scalar_ = false;  // the piece is a bare number or literal
};

}  // namespace meshsim::traces::detail
