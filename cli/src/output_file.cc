#include "output_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <streambuf>
#include <system_error>
#include <vector>

#include "meshsim/scenario/step_report.h"
#include "meshsim/sim/error.h"

namespace meshsim::cli {
namespace {

namespace fs = std::filesystem;

// A temporary name in `path`'s directory, unique within this process and among processes.
std::string temp_beside(const std::string& path) {
  static std::atomic<int> counter{0};
  const fs::path dir = fs::path(path).parent_path();
  const std::string name = fmt::format(".meshsim-{}-{}.tmp", getpid(), counter++);
  return (dir.empty() ? fs::path(name) : dir / name).string();
}

}  // namespace

// A stream buffer over a file descriptor: 64 KiB buffered, written with write(2), and the first
// failure's errno kept (ofstream reports only that something failed, not ENOSPC or EFBIG).
class OutputFile::FileBuf : public std::streambuf {
 public:
  explicit FileBuf(int fd) : fd_(fd), buffer_(size_t{1} << 16) {
    setp(buffer_.data(), buffer_.data() + buffer_.size());
  }
  ~FileBuf() override { close(); }
  FileBuf(const FileBuf&) = delete;
  FileBuf& operator=(const FileBuf&) = delete;

  int error() const { return error_; }
  // Past `limit` bytes written, the write throws `on_limit`'s error (the stream rethrows it).
  void set_limit(int64_t limit, std::function<void()> on_limit) {
    limit_ = limit;
    on_limit_ = std::move(on_limit);
  }
  // Flushes and closes; false (error() says why) when anything failed.
  bool close() {
    if (fd_ < 0) {
      return error_ == 0;
    }
    const bool flushed = flush();
    if (::close(fd_) != 0 && error_ == 0) {
      error_ = errno;
    }
    fd_ = -1;
    return flushed && error_ == 0;
  }

 protected:
  int_type overflow(int_type c) override {
    check_limit();
    // With a limit the stream throws on a bad bit (set_limit): a write error is kept for commit()
    // to report, as without one, instead of leaving the write as an iostream failure.
    if (!flush() && !on_limit_) {
      return traits_type::eof();
    }
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override {
    check_limit();
    return flush() || on_limit_ ? 0 : -1;
  }

 private:
  void check_limit() {
    if (limit_ >= 0 && written_ + (pptr() - pbase()) > limit_) {
      limit_ = -1;  // once: closing the file after the error flushes without it
      error_ = EFBIG;
      on_limit_();
    }
  }

  bool flush() {
    const char* p = pbase();
    while (p < pptr() && error_ == 0) {
      const ssize_t n = ::write(fd_, p, static_cast<size_t>(pptr() - p));
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        error_ = n < 0 ? errno : EIO;
        break;
      }
      p += n;
      written_ += n;
    }
    setp(buffer_.data(), buffer_.data() + buffer_.size());
    return error_ == 0;
  }

  int fd_;
  int error_ = 0;
  std::vector<char> buffer_;
  int64_t written_ = 0;
  int64_t limit_ = -1;  // none
  std::function<void()> on_limit_;
};

OutputFile::OutputFile(std::string path, std::string flag)
    : path_(std::move(path)), flag_(std::move(flag)), stream_(nullptr) {
  if (path_ == kStandardOutput) {
    // Standard output, written in place (the caller sends the text report elsewhere).
    const int fd = ::dup(STDOUT_FILENO);
    if (fd < 0) {
      fail("cannot write standard output", errno);
    }
    buf_ = std::make_unique<FileBuf>(fd);
    stream_.rdbuf(buf_.get());
    return;
  }
  std::error_code ec;
  const fs::file_status st = fs::status(path_, ec);
  if (fs::is_directory(st)) {
    fail("it is a directory, expected a file name", 0);
  }
  const bool special = fs::exists(st) && !fs::is_regular_file(st);
  if (!special) {
    // The rename at the end would fail on a name the directory cannot hold: fail now instead.
    const fs::path dir = fs::path(path_).parent_path();
    const long name_max = pathconf(dir.empty() ? "." : dir.c_str(), _PC_NAME_MAX);
    if (name_max > 0 &&
        fs::path(path_).filename().string().size() > static_cast<size_t>(name_max)) {
      fail("its name is longer than the file system allows", ENAMETOOLONG);
    }
    temp_ = temp_beside(path_);
  }
  const std::string target = special ? path_ : temp_;
  const int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int error = errno;
    temp_.clear();  // nothing was created
    fail("cannot create it", error);
  }
  buf_ = std::make_unique<FileBuf>(fd);
  stream_.rdbuf(buf_.get());
}

OutputFile::~OutputFile() {
  if (!committed_ && !temp_.empty()) {
    buf_->close();
    std::remove(temp_.c_str());
  }
}

void OutputFile::fail(const std::string& what, int error) const {
  const std::string reason = error != 0 ? fmt::format(": {}", std::strerror(error)) : "";
  throw OutputError(flag_, "", fmt::format("cannot write {}: {}{}", path_, what, reason));
}

void OutputFile::set_limit(int64_t bytes, std::string limit_flag, std::string advice) {
  const std::string what =
      fmt::format("{} would pass its limit of {}", path_, scenario::format_bytes(Bytes::of(bytes)));
  buf_->set_limit(bytes, [flag = std::move(limit_flag), what, advice = std::move(advice)] {
    throw InputError(flag, "", fmt::format("{}: {}", what, advice));
  });
  stream_.exceptions(std::ios::badbit);  // the limit's error leaves the write, not a bad bit
}

void OutputFile::commit() {
  stream_.flush();
  if (!buf_->close() || !stream_) {
    fail("writing it failed", buf_->error());
  }
  if (!temp_.empty() && std::rename(temp_.c_str(), path_.c_str()) != 0) {
    fail("renaming the finished file into place failed", errno);
  }
  committed_ = true;
}

std::string dump_json(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

void write_json(OutputFile& out, const nlohmann::json& j) {
  out.stream() << dump_json(j, 2) << "\n";
  out.commit();
}

void write_json_file(const std::string& path, const nlohmann::json& j, const std::string& flag) {
  OutputFile out(path, flag);
  write_json(out, j);
}

}  // namespace meshsim::cli
