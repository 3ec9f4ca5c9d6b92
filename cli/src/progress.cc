#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace meshsim::cli {

Progress::Progress(std::string what) : Progress(std::move(what), isatty(STDERR_FILENO) != 0) {}

Progress::Progress(std::string what, bool enabled)
    : what_(std::move(what)), enabled_(enabled), start_(std::chrono::steady_clock::now()) {
  if (enabled_) {
    ticker_ = std::thread([this] { tick(); });
  }
}

Progress::~Progress() {
  if (!enabled_) {
    return;
  }
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    if (drawn_) {
      std::fputs("\r\033[K", stderr);  // erase the line
      std::fflush(stderr);
    }
  }
  wake_.notify_all();
  ticker_.join();
}

void Progress::update(std::string_view phase, int64_t done, int64_t total) {
  if (!enabled_) {
    return;
  }
  std::lock_guard lock(mutex_);
  phase_ = phase;
  done_ = done;
  total_ = total;
  draw_locked();
}

void Progress::draw_locked() {
  const auto elapsed = std::chrono::steady_clock::now() - start_;
  if (elapsed < std::chrono::seconds(1) || stop_) {
    return;
  }
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(elapsed).count();
  std::string line = fmt::format("meshsim: {}", what_);
  if (!phase_.empty()) {
    line += total_ > 0 ? fmt::format(", {} {}/{}", phase_, done_, total_)
                       : fmt::format(", {} {}", phase_, done_);
  }
  line += fmt::format(" ({} s)", seconds);
  std::fputs(("\r\033[K" + line).c_str(), stderr);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::tick() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::milliseconds(500));
    draw_locked();
  }
}

}  // namespace meshsim::cli
