// The child process a SimGrid network lives in (collectives/src/child_session.h): requests and
// replies in order, errors and deaths reported with what the child said, no descriptor leaked,
// chatty children not blocked.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "meshsim/sim/error.h"
#include "thrown.h"

// The network's private layer, tested on its own (tests may include module internals).
#include "../../collectives/src/child_session.h"

namespace meshsim::collectives::detail {
namespace {

size_t open_descriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++n;
  }
  return n;
}

// Answers each request with the sum of its numbers.
void summer(ChildSession::Channel& ch) {
  while (const auto m = ch.next()) {
    double sum = 0;
    for (const double x : *m) {
      sum += x;
    }
    ch.reply({sum, static_cast<double>(m->size())});
  }
}

TEST(ChildSession, AnswersRequestsInOrderAndLeaksNoDescriptor) {
  const size_t before = open_descriptors();
  for (int round = 0; round < 3; ++round) {
    ChildSession s("test", summer);
    EXPECT_EQ(s.call({1, 2, 3}), (std::vector<double>{6, 3}));
    EXPECT_EQ(s.call({}), (std::vector<double>{0, 0}));
    EXPECT_EQ(s.call({0.5}), (std::vector<double>{0.5, 1}));
  }
  EXPECT_EQ(open_descriptors(), before);
}

TEST(ChildSession, AnExceptionInTheChildBecomesAnInternalErrorWithItsMessage) {
  ChildSession s("SimGrid network", [](ChildSession::Channel& ch) {
    ch.next();
    throw std::runtime_error("platform has no link 7");
  });
  try {
    s.call({1});
    FAIL() << "expected an InternalError";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("SimGrid network: platform has no link 7"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(s.call({1}), InternalError);  // the session is dead
}

TEST(ChildSession, AChildThatDiesIsReportedWithItsOutput) {
  ChildSession s("test", [](ChildSession::Channel& ch) {
    ch.next();
    std::fprintf(stderr, "simgrid: assertion failed\n");
    std::fflush(stderr);
    ::_exit(3);
  });
  const std::string what = meshsim::testing::what_thrown<InternalError>(
      [&] { s.call({1}); }, "no InternalError: the call returned");
  EXPECT_NE(what.find("exited with status 3"), std::string::npos) << what;
  EXPECT_NE(what.find("assertion failed"), std::string::npos) << what;
}

TEST(ChildSession, MuchOutputDoesNotBlockTheChild) {
  ChildSession s("test", [](ChildSession::Channel& ch) {
    while (const auto m = ch.next()) {
      for (int i = 0; i < 20000; ++i) {
        std::fprintf(stdout, "line %d of chatter from the child\n", i);
      }
      std::fflush(stdout);
      ch.reply({42});
    }
  });
  EXPECT_EQ(s.call({}), std::vector<double>{42});
  EXPECT_EQ(s.call({}), std::vector<double>{42});
}

}  // namespace
}  // namespace meshsim::collectives::detail
