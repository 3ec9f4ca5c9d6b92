#include "chakra_records.h"

#include <fmt/format.h>

#include <google/protobuf/io/coded_stream.h>

#include "meshsim/sim/error.h"

namespace meshsim::traces::detail {

bool RecordReader::next(std::string_view& record) {
  if (pos_ >= bytes_.size()) {
    return false;
  }
  start_ = pos_;
  ++record_;
  uint64_t length = 0;
  int shift = 0;
  while (true) {
    if (pos_ >= bytes_.size()) {
      throw InputError(file_, fmt::format("record {} at byte {}", record_, start_),
                       "truncated varint: the file ends inside a record's length");
    }
    const auto b = static_cast<uint8_t>(bytes_[pos_++]);
    length |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      break;
    }
    shift += 7;
    if (shift >= 35) {
      throw InputError(file_, fmt::format("record {} at byte {}", record_, start_),
                       "a record's length is a varint of more than 5 bytes (expected at most 32 "
                       "bits, as Chakra's protolib writes them)");
    }
  }
  if (length > 0xffffffffu || length > bytes_.size() - pos_) {
    throw InputError(file_, fmt::format("record {} at byte {}", record_, start_),
                     fmt::format("a record of {} bytes, but {} bytes are left in the file "
                                 "(truncated, or not a Chakra trace)",
                                 length, bytes_.size() - pos_));
  }
  record = bytes_.substr(pos_, static_cast<size_t>(length));
  pos_ += static_cast<size_t>(length);
  return true;
}

void append_record(std::string& out, const google::protobuf::MessageLite& message) {
  const std::string body = message.SerializeAsString();
  uint64_t n = body.size();
  while (n >= 0x80) {
    out.push_back(static_cast<char>((n & 0x7f) | 0x80));
    n >>= 7;
  }
  out.push_back(static_cast<char>(n));
  out += body;
}

std::optional<int64_t> integer_value(const meshsim::chakra::AttributeProto& a) {
  using A = meshsim::chakra::AttributeProto;
  switch (a.value_case()) {
    case A::kInt32Val:
      return a.int32_val();
    case A::kInt64Val:
      return a.int64_val();
    case A::kUint32Val:
      return a.uint32_val();
    case A::kUint64Val:
      return a.uint64_val() > static_cast<uint64_t>(INT64_MAX)
                 ? std::nullopt
                 : std::optional<int64_t>(static_cast<int64_t>(a.uint64_val()));
    case A::kSint32Val:
      return a.sint32_val();
    case A::kSint64Val:
      return a.sint64_val();
    case A::kFixed32Val:
      return a.fixed32_val();
    case A::kFixed64Val:
      return a.fixed64_val() > static_cast<uint64_t>(INT64_MAX)
                 ? std::nullopt
                 : std::optional<int64_t>(static_cast<int64_t>(a.fixed64_val()));
    case A::kSfixed32Val:
      return a.sfixed32_val();
    case A::kSfixed64Val:
      return a.sfixed64_val();
    case A::kBoolVal:
      return a.bool_val() ? 1 : 0;
    default:
      return std::nullopt;
  }
}

std::optional<double> number_value(const meshsim::chakra::AttributeProto& a) {
  using A = meshsim::chakra::AttributeProto;
  if (a.value_case() == A::kDoubleVal) {
    return a.double_val();
  }
  if (a.value_case() == A::kFloatVal) {
    return a.float_val();
  }
  if (const std::optional<int64_t> i = integer_value(a)) {
    return static_cast<double>(*i);
  }
  return std::nullopt;
}

}  // namespace meshsim::traces::detail
