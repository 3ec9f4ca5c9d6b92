#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace meshsim::cli {

Progress::Mode Progress::mode_here(bool lines_elsewhere) {
  if (isatty(STDERR_FILENO) != 0) {
    return Mode::kTerminal;
  }
  return lines_elsewhere ? Mode::kLines : Mode::kOff;
}

Progress::Progress(std::string what, bool lines_elsewhere)
    : Progress(std::move(what), mode_here(lines_elsewhere)) {}

Progress::Progress(std::string what, Mode mode)
    : what_(std::move(what)), mode_(mode), start_(std::chrono::steady_clock::now()) {
  last_line_ = start_;
  if (mode_ != Mode::kOff) {
    ticker_ = std::thread([this] { tick(); });
  }
}

Progress::~Progress() {
  if (mode_ == Mode::kOff) {
    return;
  }
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    if (drawn_ && mode_ == Mode::kTerminal) {
      std::fputs("\r\033[K", stderr);  // erase the line
      std::fflush(stderr);
    }
  }
  wake_.notify_all();
  ticker_.join();
}

void Progress::update(std::string_view phase, int64_t done, int64_t total) {
  if (mode_ == Mode::kOff) {
    return;
  }
  std::lock_guard lock(mutex_);
  phase_ = phase;
  done_ = done;
  total_ = total;
  draw_locked();
}

std::string Progress::line_locked() const {
  std::string line = fmt::format("meshsim: {}", what_);
  if (!phase_.empty()) {
    line += total_ > 0 ? fmt::format(", {} {}/{}", phase_, done_, total_)
                       : fmt::format(", {} {}", phase_, done_);
  }
  return line;
}

void Progress::draw_locked() {
  const auto now = std::chrono::steady_clock::now();
  const auto elapsed = now - start_;
  if (elapsed < std::chrono::seconds(1) || stop_) {
    return;
  }
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(elapsed).count();
  const std::string text = line_locked();
  if (mode_ == Mode::kTerminal) {
    std::fputs(("\r\033[K" + text + fmt::format(" ({} s)", seconds)).c_str(), stderr);
  } else {
    const auto since = now - last_line_;
    const bool moved = text != last_text_;
    if (since < std::chrono::seconds(1) || (!moved && since < std::chrono::seconds(10))) {
      return;
    }
    std::fputs((text + fmt::format(" ({} s)\n", seconds)).c_str(), stderr);
    last_line_ = now;
    last_text_ = text;
  }
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
