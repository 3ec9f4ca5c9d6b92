// Private: Chakra's record framing and the attributes meshsim reads and writes (chakra.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chakra_et.pb.h"
#include "meshsim/sim/program.h"
#include "meshsim/traces/chakra.h"

namespace meshsim::traces::detail {

// Splits a file into its records: a varint length (at most 32 bits, protolib.py's
// _DecodeVarint32) and that many bytes. next() returns false at the end of the file; a truncated
// varint or a length past the end of the file is an InputError naming the file, the record and
// its byte offset.
class RecordReader {
 public:
  RecordReader(std::string_view bytes, const std::string& file) : bytes_(bytes), file_(file) {}
  bool next(std::string_view& record);
  int64_t record() const { return record_; }   // 0 = GlobalMetadata, k = the k-th node
  size_t offset() const { return start_; }     // byte offset of the record's varint

 private:
  std::string_view bytes_;
  const std::string& file_;
  size_t pos_ = 0;
  size_t start_ = 0;
  int64_t record_ = -1;
};

// Appends one record (varint length, message) to `out`.
void append_record(std::string& out, const google::protobuf::MessageLite& message);

// An attribute's value as an integer, whatever integer (or bool) field holds it; nullopt when it
// holds none of them (a double, a string, a list, or no value).
std::optional<int64_t> integer_value(const meshsim::chakra::AttributeProto& a);
std::optional<double> number_value(const meshsim::chakra::AttributeProto& a);

// What import keeps of a node until the programs are built: its op (work and name; stream, slots
// and dependencies still to bind) and how to bind them.
struct PendingNode {
  uint64_t id = 0;
  Op op;
  std::vector<uint64_t> deps;  // data_deps
  std::optional<int64_t> stream;  // an explicit "stream" attribute
  enum class Implicit : uint8_t { kCompute, kHost, kGroup, kPeer } implicit = Implicit::kCompute;
  std::string group_key;  // COMM_COLL: its pg_name ("" = every rank)
  int64_t peer = -1;      // send / receive: the other rank
};

// The nodes of every rank (files[r] is rank r's) into `out`'s programs, groups and slots: the
// dependencies resolved and sorted, streams and slots bound, and the checks across ranks
// (collectives agree per group, sends meet receives). InputError naming the file and node.
void build_programs(std::vector<std::vector<PendingNode>>& nodes,
                    const std::vector<std::string>& files,
                    const std::map<std::string, std::vector<RankId>>& groups,
                    ChakraWorkload& out);

}  // namespace meshsim::traces::detail
