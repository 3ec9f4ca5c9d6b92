#include "child_session.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "meshsim/sim/error.h"

namespace meshsim::collectives::detail {
namespace {

struct Header {
  uint32_t magic = 0;
  uint32_t kind = 0;
  uint64_t size = 0;  // payload bytes
};
constexpr uint32_t kMagic = 0x4d534732;  // "MSG2"
constexpr uint32_t kKindMessage = 0;
constexpr uint32_t kKindError = 1;
constexpr size_t kOutputTail = 2000;

// Moves exactly `size` bytes through `io` (::read or ::write), retrying on EINTR; false at end of
// file or on an error.
template <typename Io, typename Ptr>
bool all(Io io, int fd, Ptr data, size_t size) {
  using Byte = std::conditional_t<std::is_const_v<std::remove_pointer_t<Ptr>>, const char, char>;
  auto* p = static_cast<Byte*>(data);
  while (size > 0) {
    const ssize_t n = io(fd, p, size);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool write_all(int fd, const void* data, size_t size) { return all(::write, fd, data, size); }
bool read_all(int fd, void* data, size_t size) { return all(::read, fd, data, size); }

bool send_frame(int fd, uint32_t kind, const void* data, size_t size) {
  const Header h{kMagic, kind, size};
  return write_all(fd, &h, sizeof h) && (size == 0 || write_all(fd, data, size));
}

int make_pipe(int fds[2], const std::string& what) {
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw InternalError(fmt::format("{}: cannot create a pipe: {}", what, std::strerror(errno)));
  }
  return 0;
}

class ChildChannel final : public ChildSession::Channel {
 public:
  std::optional<ChildSession::Message> next() override {
    Header h;
    if (!read_all(0, &h, sizeof h) || h.magic != kMagic || h.size % sizeof(double) != 0) {
      return std::nullopt;
    }
    ChildSession::Message m(h.size / sizeof(double));
    if (h.size > 0 && !read_all(0, m.data(), h.size)) {
      return std::nullopt;
    }
    return m;
  }
  void reply(const ChildSession::Message& m) override {
    if (!send_frame(3, kKindMessage, m.data(), m.size() * sizeof(double))) {
      ::_exit(121);
    }
  }
};

// In the child: requests on descriptor 0, replies on 3, stdout and stderr to the output pipe.
[[noreturn]] void child_main(int request_fd, int reply_fd, int output_fd,
                             const std::function<void(ChildSession::Channel&)>& serve) {
  const int req = ::fcntl(request_fd, F_DUPFD, 100);
  const int rep = ::fcntl(reply_fd, F_DUPFD, 100);
  const int out = ::fcntl(output_fd, F_DUPFD, 100);
  if (req < 0 || rep < 0 || out < 0 || ::dup2(req, STDIN_FILENO) < 0 ||
      ::dup2(out, STDOUT_FILENO) < 0 || ::dup2(out, STDERR_FILENO) < 0 || ::dup2(rep, 3) < 0) {
    ::_exit(120);
  }
  ::close_range(4, ~0U, 0);  // best effort: the pipes are CLOEXEC anyway
  try {
    ChildChannel channel;
    serve(channel);
  } catch (const std::exception& e) {
    send_frame(3, kKindError, e.what(), std::strlen(e.what()));
    ::_exit(122);
  } catch (...) {
    const char text[] = "unknown exception";
    send_frame(3, kKindError, text, sizeof text - 1);
    ::_exit(122);
  }
  ::_exit(0);
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) {
    return fmt::format("exited with status {}", WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status),
                       ::strsignal(WTERMSIG(status)));
  }
  return fmt::format("ended with wait status {}", status);
}

}  // namespace

ChildSession::ChildSession(std::string what, std::function<void(Channel&)> serve)
    : what_(std::move(what)) {
  int req[2];
  int rep[2];
  int out[2];
  make_pipe(req, what_);
  make_pipe(rep, what_);
  make_pipe(out, what_);
  pid_ = ::fork();
  if (pid_ < 0) {
    for (const int fd : {req[0], req[1], rep[0], rep[1], out[0], out[1]}) {
      ::close(fd);
    }
    throw InternalError(fmt::format("{}: fork failed: {}", what_, std::strerror(errno)));
  }
  if (pid_ == 0) {
    child_main(req[0], rep[1], out[1], serve);
  }
  ::close(req[0]);
  ::close(rep[1]);
  ::close(out[1]);
  request_fd_ = req[1];
  reply_fd_ = rep[0];
  output_fd_ = out[0];
  ::fcntl(output_fd_, F_SETFL, ::fcntl(output_fd_, F_GETFL) | O_NONBLOCK);
}

ChildSession::~ChildSession() {
  ::close(request_fd_);
  if (!dead_) {
    // Drain to the end so that a chatty child cannot block on a full output pipe while leaving.
    char buf[4096];
    while (::read(reply_fd_, buf, sizeof buf) > 0) {
    }
  }
  ::close(reply_fd_);
  ::close(output_fd_);
  int status = 0;
  while (pid_ > 0 && ::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

void ChildSession::fail(const std::string& why) {
  dead_ = true;
  throw InternalError(fmt::format("{}: {}", what_, why));
}

ChildSession::Message ChildSession::call(const Message& request) {
  if (dead_) {
    fail("the child process is gone (an earlier call failed)");
  }
  if (!send_frame(request_fd_, kKindMessage, request.data(), request.size() * sizeof(double))) {
    fail("cannot write to the child process");
  }
  // Wait for the reply, draining the child's output meanwhile.
  char buf[65536];
  while (true) {
    pollfd fds[2] = {{reply_fd_, POLLIN, 0}, {output_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      fail(fmt::format("poll: {}", std::strerror(errno)));
    }
    if (fds[1].revents != 0) {
      const ssize_t n = ::read(output_fd_, buf, sizeof buf);
      if (n > 0) {
        output_.append(buf, static_cast<size_t>(n));
        if (output_.size() > 4 * kOutputTail) {
          output_.erase(0, output_.size() - kOutputTail);
        }
      }
    }
    if (fds[0].revents != 0) {
      break;
    }
  }
  Header h;
  if (!read_all(reply_fd_, &h, sizeof h) || h.magic != kMagic) {
    int status = 0;
    std::string exit_text = "could not be waited for";
    if (::waitpid(pid_, &status, 0) == pid_) {
      exit_text = describe_exit(status);
      pid_ = -1;
    }
    const std::string tail = output_.size() <= kOutputTail
                                 ? output_
                                 : "..." + output_.substr(output_.size() - kOutputTail);
    fail(fmt::format("the child process {} without a reply{}{}", exit_text,
                     tail.empty() ? "" : "; its output:\n", tail));
  }
  std::string payload(h.size, '\0');
  if (h.size > 0 && !read_all(reply_fd_, payload.data(), h.size)) {
    fail("the child process sent a truncated reply");
  }
  if (h.kind == kKindError) {
    fail(payload);
  }
  Message m(h.size / sizeof(double));
  if (!m.empty()) {
    std::memcpy(m.data(), payload.data(), m.size() * sizeof(double));
  }
  return m;
}

}  // namespace meshsim::collectives::detail
