#include "simgrid_fork.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>

#include "meshsim/sim/error.h"

namespace meshsim::collectives::detail {

namespace {

// Frame of the child's one message: a header, then `size` bytes (doubles, or an error text).
struct Header {
  uint32_t magic = 0;
  uint32_t kind = 0;
  uint64_t size = 0;
};
constexpr uint32_t kMagic = 0x4d534731;  // "MSG1"
constexpr uint32_t kKindResult = 0;
constexpr uint32_t kKindError = 1;
constexpr size_t kOutputTail = 2000;  // characters of the child's stderr quoted in an error

// Owns a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }

 private:
  int fd_ = -1;
};

struct Pipe {
  Fd read;
  Fd write;
};

Pipe make_pipe(std::string_view what) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw InternalError(fmt::format("{}: cannot create a pipe: {}", what, std::strerror(errno)));
  }
  return Pipe{Fd(fds[0]), Fd(fds[1])};
}

bool write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
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

bool send_message(int fd, uint32_t kind, const void* data, size_t size) {
  const Header h{kMagic, kind, size};
  return write_all(fd, &h, sizeof h) && write_all(fd, data, size);
}

// In the child: route stdout and stderr to `output_fd`, keep `result_fd` as descriptor 3, close
// everything else, run `work`, report, and leave without returning.
[[noreturn]] void child_main(int result_fd, int output_fd,
                             const std::function<std::vector<double>()>& work) {
  // Move both pipes out of the way first: they may have been given descriptors 0 to 3.
  const int result = ::fcntl(result_fd, F_DUPFD, 100);
  const int output = ::fcntl(output_fd, F_DUPFD, 100);
  if (result < 0 || output < 0 || ::dup2(output, STDOUT_FILENO) < 0 ||
      ::dup2(output, STDERR_FILENO) < 0 || ::dup2(result, 3) < 0) {
    ::_exit(120);
  }
  ::close_range(4, ~0U, 0);  // best effort (ENOSYS before Linux 5.9): the pipes are CLOEXEC anyway
  bool sent = false;
  try {
    const std::vector<double> values = work();
    sent = send_message(3, kKindResult, values.data(), values.size() * sizeof(double));
  } catch (const std::exception& e) {
    sent = send_message(3, kKindError, e.what(), std::strlen(e.what()));
  } catch (...) {
    const char text[] = "unknown exception";
    sent = send_message(3, kKindError, text, sizeof text - 1);
  }
  ::_exit(sent ? 0 : 121);
}

// Reads both pipes to their ends (together, so that a child writing much to stderr cannot block
// while we wait on its result).
void drain(int result_fd, int output_fd, std::string& result, std::string& output,
           std::string_view what) {
  pollfd fds[2] = {{result_fd, POLLIN, 0}, {output_fd, POLLIN, 0}};
  std::string* sinks[2] = {&result, &output};
  int open = 2;
  char buf[65536];
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      throw InternalError(
          fmt::format("{}: poll on the child's pipes: {}", what, std::strerror(errno)));
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) {
        continue;
      }
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        fds[i].fd = -1;  // end of file (or an error: treat as end)
        --open;
        continue;
      }
      sinks[i]->append(buf, static_cast<size_t>(n));
    }
  }
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

std::string tail(const std::string& s) {
  return s.size() <= kOutputTail ? s : "..." + s.substr(s.size() - kOutputTail);
}

// Decodes the child's message; throws InternalError if it reported an error or said nothing.
std::vector<double> decode(const std::string& bytes, const std::string& exit_text,
                           const std::string& output, std::string_view what) {
  Header h;
  if (bytes.size() >= sizeof h) {
    std::memcpy(&h, bytes.data(), sizeof h);
  }
  const bool framed =
      bytes.size() >= sizeof h && h.magic == kMagic && bytes.size() - sizeof h == h.size;
  if (framed && h.kind == kKindResult && h.size % sizeof(double) == 0) {
    std::vector<double> values(h.size / sizeof(double));
    if (!values.empty()) {  // (an empty vector's data() may be null, even for 0 bytes)
      std::memcpy(values.data(), bytes.data() + sizeof h, h.size);
    }
    return values;
  }
  if (framed && h.kind == kKindError) {
    throw InternalError(fmt::format("{}: {}", what, bytes.substr(sizeof h)));
  }
  throw InternalError(fmt::format("{}: the child process {} without a result{}{}", what, exit_text,
                                  output.empty() ? "" : "; its output:\n", tail(output)));
}

}  // namespace

std::vector<double> run_in_child(std::string_view what,
                                 const std::function<std::vector<double>()>& work) {
  Pipe result = make_pipe(what);
  Pipe output = make_pipe(what);
  const pid_t pid = ::fork();
  if (pid < 0) {
    throw InternalError(fmt::format("{}: fork failed: {}", what, std::strerror(errno)));
  }
  if (pid == 0) {
    child_main(result.write.get(), output.write.get(), work);
  }
  result.write.reset();
  output.write.reset();
  std::string result_bytes;
  std::string output_bytes;
  std::exception_ptr drain_error;
  try {
    drain(result.read.get(), output.read.get(), result_bytes, output_bytes, what);
  } catch (const InternalError&) {
    drain_error = std::current_exception();
    ::kill(pid, SIGKILL);  // do not leave it blocked on a pipe nobody reads
  }
  result.read.reset();
  output.read.reset();
  int status = 0;
  pid_t waited = 0;
  do {
    waited = ::waitpid(pid, &status, 0);
  } while (waited < 0 && errno == EINTR);
  if (drain_error) {
    std::rethrow_exception(drain_error);
  }
  const std::string exit_text =
      waited == pid ? describe_exit(status) : std::string("could not be waited for");
  std::vector<double> values = decode(result_bytes, exit_text, output_bytes, what);
  if (waited == pid && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    throw InternalError(fmt::format("{}: the child process {} after sending its result{}{}", what,
                                    exit_text, output_bytes.empty() ? "" : "; its output:\n",
                                    tail(output_bytes)));
  }
  return values;
}

}  // namespace meshsim::collectives::detail
