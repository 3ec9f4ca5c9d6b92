// Private: a child process that serves requests, one at a time, over pipes.
//
// Why a child: SimGrid's engine is a process-wide singleton that cannot be rebuilt after a run,
// and meshsim keeps no global state (docs/style.md A.3): every SimGrid network lives in a fresh
// child process of its own, so any number of them can exist in one process. The child is a fork, so
// it sees the caller's memory as it was at the fork, copy-on-write, and nothing it does reaches
// back.
//
// Protocol: every request and reply is a frame (a header, then doubles). The child runs
// `serve`, which reads requests with Channel::next and answers each with Channel::reply; when the
// parent closes the session (destructor), next() returns nullopt, `serve` returns and the child
// leaves with _exit (no atexit handlers, no destructors of the caller's objects). An exception
// in `serve` is sent back as an error frame and becomes InternalError in the parent, with the
// message; a child that dies is reported with its exit status and the tail of its output. Its
// stdout and stderr go to a pipe the parent drains while it waits (SimGrid's diagnostics, shown
// only on failure). Every other descriptor is closed in the child.
// Caveat: the child of a multithreaded caller has only the calling thread; `serve` must not need
// locks that other threads of the caller may hold.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace meshsim::collectives::detail {

class ChildSession {
 public:
  using Message = std::vector<double>;

  class Channel {
   public:
    virtual ~Channel() = default;
    virtual std::optional<Message> next() = 0;
    virtual void reply(const Message& m) = 0;
  };

  // Forks the child; throws InternalError naming `what` if it cannot.
  ChildSession(std::string what, std::function<void(Channel&)> serve);
  ~ChildSession();
  ChildSession(const ChildSession&) = delete;
  ChildSession& operator=(const ChildSession&) = delete;

  // Sends `request` and waits for the reply; throws InternalError naming `what` when the child
  // reports an error or dies (the session is then dead: every later call throws).
  Message call(const Message& request);

 private:
  std::string what_;
  pid_t pid_ = -1;
  int request_fd_ = -1;
  int reply_fd_ = -1;
  int output_fd_ = -1;
  std::string output_;
  bool dead_ = false;

  [[noreturn]] void fail(const std::string& why);
};

}  // namespace meshsim::collectives::detail
