// Chakra execution traces in and out (traces/chakra.h): a real trace of Chakra's own tests,
// small hand-built ones with known answers, every refusal naming the file, the node and the
// field, and export -> import keeping the programs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <zlib.h>

#include "chakra_et.pb.h"
#include "meshsim/sim/error.h"
#include "meshsim/traces/chakra.h"
#include "temp_file.h"

namespace meshsim::traces {
namespace {

namespace fs = std::filesystem;
namespace pb = meshsim::chakra;
using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kFixtures = MESHSIM_FIXTURES;

std::string varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

std::string record(const google::protobuf::MessageLite& m) {
  const std::string body = m.SerializeAsString();
  return varint(body.size()) + body;
}

void set_attr(pb::Node& n, const char* name, int64_t v) {
  pb::AttributeProto* a = n.add_attr();
  a->set_name(name);
  a->set_int64_val(v);
}

void set_text(pb::Node& n, const char* name, const std::string& v) {
  pb::AttributeProto* a = n.add_attr();
  a->set_name(name);
  a->set_string_val(v);
}

pb::Node node(uint64_t id, pb::NodeType type, std::vector<uint64_t> deps = {}) {
  pb::Node n;
  n.set_id(id);
  n.set_name(fmt::format("node{}", id));
  n.set_type(type);
  for (const uint64_t d : deps) {
    n.add_data_deps(d);
  }
  return n;
}

pb::Node kernel(uint64_t id, uint64_t micros, std::vector<uint64_t> deps = {}) {
  pb::Node n = node(id, pb::COMP_NODE, std::move(deps));
  n.set_duration_micros(micros);
  return n;
}

pb::Node all_reduce(uint64_t id, int64_t bytes, std::vector<uint64_t> deps = {}) {
  pb::Node n = node(id, pb::COMM_COLL_NODE, std::move(deps));
  set_attr(n, "comm_type", pb::ALL_REDUCE);
  set_attr(n, "comm_size", bytes);
  return n;
}

// A directory of traces, one per rank, each a list of nodes; `raw` replaces a rank's bytes.
class ChakraTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch::temp_dir() /
           fmt::format("chakra-{}", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::vector<std::vector<pb::Node>>& ranks) const {
    for (size_t r = 0; r < ranks.size(); ++r) {
      std::string bytes = record(pb::GlobalMetadata());
      for (const pb::Node& n : ranks[r]) {
        bytes += record(n);
      }
      write_raw(r, bytes);
    }
    return dir_.string();
  }
  void write_raw(size_t rank, const std::string& bytes) const {
    std::ofstream(dir_ / fmt::format("rank.{}.et", rank), std::ios::binary) << bytes;
  }
  std::string error(const std::vector<std::vector<pb::Node>>& ranks) const {
    return error_of(write(ranks));
  }
  std::string error_of(const std::string& path) const {
    try {
      read_chakra_workload(path);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  }
  std::string file(size_t rank) const { return (dir_ / fmt::format("rank.{}.et", rank)).string(); }

  fs::path dir_;
};

// Chakra's own feeder-test trace: 3,664 nodes of a PyTorch run (gzip-compressed), one rank.
TEST_F(ChakraTest, RealTraceOfChakrasFeederTests) {
  const ChakraWorkload w = read_chakra_workload(kFixtures + "/chakra-feeder");
  ASSERT_EQ(w.programs.size(), 1u);
  EXPECT_EQ(w.nodes, 3664);
  EXPECT_EQ(w.programs[0].size(), 3664u);
  EXPECT_EQ(w.collectives, 7);  // the NCCL kernels; the 14 c10d host operators are host ops
  EXPECT_EQ(w.measured, 3507 - 7);  // every compute node with a duration (collectives aside)
  EXPECT_EQ(w.measured + w.untimed, 3664 - 7);
  ASSERT_EQ(w.groups.size(), 1u);  // no pg_name: every rank
  EXPECT_EQ(w.groups[0].size(), 1u);
  // Host operators on one stream, GPU kernels on another, the collectives on a third.
  EXPECT_EQ(w.programs[0].num_streams(), 3);
}

TEST_F(ChakraTest, TwoRanksKnownProgram) {
  pb::Node send = node(3, pb::COMM_SEND_NODE, {2});
  set_attr(send, "comm_dst", 1);
  set_attr(send, "comm_size", 4096);
  set_attr(send, "comm_tag", 7);
  pb::Node recv = node(9, pb::COMM_RECV_NODE);
  set_attr(recv, "comm_src", 0);
  set_attr(recv, "comm_size", 4096);
  set_attr(recv, "comm_tag", 7);
  pb::Node host = kernel(1, 3);
  set_attr(host, "is_cpu_op", 1);
  // Rank 0: ids out of order (the dependency decides), a ctrl dep that does not order anything.
  pb::Node late = kernel(2, 10, {5});
  late.add_ctrl_deps(1);
  const std::string dir = write({{host, late, all_reduce(5, 1 << 20), send},
                                 {all_reduce(4, 1 << 20), kernel(8, 20, {4}), recv}});
  const ChakraWorkload w = read_chakra_workload(dir);
  ASSERT_EQ(w.programs.size(), 2u);
  const Program& p0 = w.programs[0];
  ASSERT_EQ(p0.size(), 4u);
  // Order: node 1, then 5 (2 waits on it), then 2, then 3.
  EXPECT_EQ(p0.op(OpId(0)).name, "node1");
  EXPECT_EQ(p0.op(OpId(1)).name, "node5");
  EXPECT_EQ(p0.op(OpId(2)).name, "node2");
  EXPECT_EQ(p0.op(OpId(3)).name, "node3");
  EXPECT_EQ(p0.predecessors(OpId(2)), std::vector<OpId>{OpId(1)});  // not node 1: a ctrl dep
  EXPECT_EQ(std::get<ComputeWork>(p0.op(OpId(2)).work).measured, Microseconds(10));
  // Streams: the host op, the all-reduce's group, the compute kernel, the peer.
  EXPECT_NE(p0.op(OpId(0)).stream, p0.op(OpId(2)).stream);
  EXPECT_NE(p0.op(OpId(1)).stream, p0.op(OpId(2)).stream);
  const auto& s = std::get<PeerWork>(p0.op(OpId(3)).work);
  EXPECT_TRUE(p0.op(OpId(3)).is_send);
  EXPECT_EQ(s.bytes, Bytes::of(4096));
  EXPECT_EQ(s.tag, 7);
  EXPECT_EQ(w.peer_slots[0].at(s.peer_slot), RankId(1));
  ASSERT_EQ(w.groups.size(), 1u);
  EXPECT_EQ(w.groups[0], (std::vector<RankId>{RankId(0), RankId(1)}));
  EXPECT_EQ(w.measured, 3);
  EXPECT_EQ(w.collectives, 2);
  EXPECT_EQ(w.p2p, 2);
}

TEST_F(ChakraTest, NamedGroupsFromCommGroupJson) {
  pb::Node a = all_reduce(1, 1024);
  set_text(a, "pg_name", "tp");
  const std::string dir = write({{a}, {a}, {kernel(1, 1)}});
  std::ofstream(dir_ / "comm_group.json") << R"({"tp": [1, 0]})";
  const ChakraWorkload w = read_chakra_workload(dir_.string() + "/rank");  // the prefix form
  ASSERT_EQ(w.groups.size(), 1u);
  EXPECT_EQ(w.groups[0], (std::vector<RankId>{RankId(0), RankId(1)}));
  EXPECT_EQ(w.group_names[0], "tp");
  (void)dir;
}

TEST_F(ChakraTest, RefusalsNameTheFileTheNodeAndTheField) {
  // Framing: a truncated varint, a record past the end, garbage, an empty file.
  write_raw(0, record(pb::GlobalMetadata()) + "\xff\xff");
  EXPECT_THAT(error_of(dir_.string()), AllOf(HasSubstr(file(0)), HasSubstr("record 1 at byte 1"),
                                             HasSubstr("truncated varint")));
  write_raw(0, record(pb::GlobalMetadata()) + varint(1000) + "abc");
  EXPECT_THAT(error_of(dir_.string()), HasSubstr("a record of 1000 bytes, but 3 bytes are left"));
  write_raw(0, record(pb::GlobalMetadata()) + varint(3) + "\xff\xff\xff");
  EXPECT_THAT(error_of(dir_.string()), HasSubstr("not a Chakra Node message"));
  write_raw(0, "");
  EXPECT_THAT(error_of(dir_.string()), HasSubstr("empty"));
  // The graph: duplicates, unknown dependencies, cycles.
  EXPECT_THAT(error({{kernel(1, 1), kernel(1, 2)}}),
              AllOf(HasSubstr("node 1 ('node1'), id"), HasSubstr("appears twice")));
  EXPECT_THAT(error({{kernel(1, 1, {9})}}),
              AllOf(HasSubstr("node 1, data_deps"), HasSubstr("node 9, which is not")));
  EXPECT_THAT(error({{kernel(1, 1, {3}), kernel(2, 1, {1}), kernel(3, 1, {2}), kernel(4, 1)}}),
              AllOf(HasSubstr("node 1, data_deps"), HasSubstr("a cycle"),
                    HasSubstr("3 nodes wait")));
  // Fields out of range.
  EXPECT_THAT(error({{all_reduce(1, int64_t{1} << 60)}}),
              AllOf(HasSubstr("node 1 ('node1'), comm_size"), HasSubstr("from 0 to")));
  EXPECT_THAT(error({{kernel(1, uint64_t{1} << 50)}}), HasSubstr("duration_micros"));
  pb::Node lonely = node(1, pb::COMM_SEND_NODE);
  set_attr(lonely, "comm_size", 8);
  EXPECT_THAT(error({{lonely}, {kernel(1, 1)}}), HasSubstr("comm_dst"));
  set_attr(lonely, "comm_dst", 0);
  EXPECT_THAT(error({{lonely}, {kernel(1, 1)}}), HasSubstr("rank 0 sends to itself"));
  pb::Node mem = node(1, pb::MEM_LOAD_NODE);
  EXPECT_THAT(error({{mem}}), AllOf(HasSubstr("node 1 ('node1'), type"), HasSubstr("remote")));
  pb::Node gather = node(1, pb::COMM_COLL_NODE);
  set_attr(gather, "comm_type", pb::GATHER);
  set_attr(gather, "comm_size", 8);
  EXPECT_THAT(error({{gather}}), HasSubstr("gather and scatter"));
  pb::Node copy_engine = all_reduce(1, 8);
  set_attr(copy_engine, "meshsim_copy_engine", 1);
  EXPECT_THAT(error({{copy_engine}}),
              AllOf(HasSubstr("node 1 ('node1'), meshsim_copy_engine"), HasSubstr("a bool")));
  pb::Node named = all_reduce(1, 8);
  set_text(named, "pg_name", "dp");
  EXPECT_THAT(error({{named}}), AllOf(HasSubstr("pg_name"), HasSubstr("comm_group.json")));
  // Across ranks: collectives that disagree, a send without its receive.
  EXPECT_THAT(error({{all_reduce(1, 8)}, {all_reduce(1, 16)}}),
              AllOf(HasSubstr("collective #1"), HasSubstr("all-reduce of 8 B"),
                    HasSubstr("all-reduce of 16 B")));
  EXPECT_THAT(error({{all_reduce(1, 8), all_reduce(2, 8, {1})}, {all_reduce(1, 8)}}),
              HasSubstr("collective #2"));
  pb::Node send = node(1, pb::COMM_SEND_NODE);
  set_attr(send, "comm_dst", 1);
  set_attr(send, "comm_size", 8);
  EXPECT_THAT(error({{send}, {kernel(1, 1)}}), AllOf(HasSubstr(file(0)), HasSubstr("no receive")));
}

// The bounds of ChakraLimits, each named in its error (small ones here; the defaults are the same
// code).
TEST_F(ChakraTest, LimitsAreStated) {
  ChakraLimits small;
  small.max_nodes = 3;
  const std::string dir = write({{kernel(1, 1), kernel(2, 1)}, {kernel(1, 1), kernel(2, 1)}});
  try {
    read_chakra_workload(dir, small);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr(file(1)), HasSubstr("record 2"),
                                HasSubstr("more than 3 nodes in all the traces")));
  }
  ChakraLimits tiny;
  tiny.max_file_bytes = 8;
  EXPECT_THROW(read_chakra_workload(dir, tiny), InputSizeError);
  // A gzip-compressed trace inflating past the limit (Chakra's protoio reads gzip).
  const std::string big(1 << 20, ' ');
  z_stream zs{};
  std::string gz(1 << 16, '\0');
  deflateInit2_(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                static_cast<int>(sizeof(z_stream)));
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(big.data()));
  zs.avail_in = static_cast<uInt>(big.size());
  zs.next_out = reinterpret_cast<Bytef*>(gz.data());
  zs.avail_out = static_cast<uInt>(gz.size());
  ASSERT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  gz.erase(static_cast<size_t>(zs.total_out));
  deflateEnd(&zs);
  write_raw(0, gz);
  ChakraLimits half_mib;
  half_mib.max_file_bytes = int64_t{1} << 19;
  try {
    read_chakra_workload(dir, half_mib);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr(file(0)), HasSubstr("inflates to more than")));
  }
}

TEST_F(ChakraTest, FilesOfTheDirectory) {
  write({{kernel(1, 1)}, {kernel(1, 1)}});
  fs::rename(dir_ / "rank.1.et", dir_ / "rank.2.et");
  EXPECT_THAT(error_of(dir_.string()), HasSubstr("no trace of rank 1"));
  std::ofstream(dir_ / "other.1.et") << "";
  EXPECT_THAT(error_of(dir_.string()), HasSubstr("several prefixes"));
  EXPECT_THAT(error_of((dir_ / "nothing").string()), HasSubstr("no <prefix>.<rank>.et files"));
}

// A dependency chain of 100,000 nodes: sorted without recursion (a recursive walk would be as
// deep as the chain).
TEST_F(ChakraTest, LongChainImports) {
  std::vector<pb::Node> chain;
  for (uint64_t i = 0; i < 100000; ++i) {
    chain.push_back(i == 0 ? kernel(0, 1) : kernel(i, 1, {i - 1}));
  }
  const ChakraWorkload w = read_chakra_workload(write({chain}));
  EXPECT_EQ(w.programs[0].size(), 100000u);
  EXPECT_EQ(w.programs[0].predecessors(OpId(99999)), std::vector<OpId>{OpId(99998)});
}

// Export writes what import reads back: the same ops, streams, dependencies and groups.
TEST_F(ChakraTest, ExportThenImportKeepsThePrograms) {
  pb::Node send = node(3, pb::COMM_SEND_NODE, {2});
  set_attr(send, "comm_dst", 1);
  set_attr(send, "comm_size", 4096);
  pb::Node recv = node(9, pb::COMM_RECV_NODE);
  set_attr(recv, "comm_src", 0);
  set_attr(recv, "comm_size", 4096);
  ChakraWorkload a = read_chakra_workload(
      write({{kernel(1, 3), kernel(2, 10, {5}), all_reduce(5, 1 << 20), send},
             {all_reduce(4, 1 << 20), kernel(8, 20, {4}), recv}}));
  std::vector<ChakraRank> ranks(2);
  for (size_t r = 0; r < 2; ++r) {
    ranks[r].program = &a.programs[r];
    for (const GroupId g : a.group_slots[r]) {
      ranks[r].groups.push_back(a.groups[g.index()]);
    }
    ranks[r].peers = a.peer_slots[r];
  }
  const fs::path out = dir_ / "out";
  write_chakra_workload(out.string(), ranks, "test");
  const ChakraWorkload b = read_chakra_workload(out.string());
  ASSERT_EQ(b.programs.size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(b.programs[r].size(), a.programs[r].size());
    for (uint32_t i = 0; i < a.programs[r].size(); ++i) {
      const Op& x = a.programs[r].op(OpId(i));
      const Op& y = b.programs[r].op(OpId(i));
      EXPECT_EQ(x.name, y.name);
      EXPECT_EQ(x.stream, y.stream);
      EXPECT_EQ(x.kind(), y.kind());
      EXPECT_EQ(x.work.index(), y.work.index());
      if (const auto* c = std::get_if<ComputeWork>(&x.work)) {
        EXPECT_EQ(c->measured, std::get<ComputeWork>(y.work).measured);
      }
      // The export adds the previous op of each stream; import keeps them as dependencies.
      for (const OpId d : a.programs[r].predecessors(OpId(i))) {
        const std::vector<OpId> after = b.programs[r].predecessors(OpId(i));
        EXPECT_NE(std::find(after.begin(), after.end(), d), after.end());
      }
    }
  }
  EXPECT_EQ(b.groups, a.groups);
  // Canonical: writing the import again gives the same bytes.
  std::vector<ChakraRank> again(2);
  for (size_t r = 0; r < 2; ++r) {
    again[r] = ranks[r];
    again[r].program = &b.programs[r];
  }
  write_chakra_workload((dir_ / "again").string(), again, "test");
  for (const char* f : {"rank.0.et", "rank.1.et", "comm_group.json"}) {
    std::ifstream x(out / f, std::ios::binary);
    std::ifstream y(dir_ / "again" / f, std::ios::binary);
    const std::string xs((std::istreambuf_iterator<char>(x)), {});
    const std::string ys((std::istreambuf_iterator<char>(y)), {});
    EXPECT_TRUE(xs == ys) << f << " differs";
  }
}

}  // namespace
}  // namespace meshsim::traces
