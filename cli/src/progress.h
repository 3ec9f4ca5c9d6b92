// A progress line on stderr for anything that takes more than a second or two (plan search,
// sweeps, a full simulation): "meshsim: simulating 12/340 plans (3 s)", silent for the first
// second, so quick runs print nothing. On a terminal the line is redrawn in place (a ticker thread
// refreshes the elapsed time when no update comes, a long single simulation) and erased when the
// work ends. Elsewhere (CI, redirects) it is quiet, or in kLines mode prints plain lines, at most
// one a second: when the work moved on, or every 10 s when it did not.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace meshsim::cli {

class Progress {
 public:
  enum class Mode : uint8_t { kOff, kTerminal, kLines };
  // On a terminal kTerminal, elsewhere kOff (or kLines with `lines_elsewhere`).
  explicit Progress(std::string what, bool lines_elsewhere = false);
  Progress(std::string what, Mode mode);
  // kTerminal on a terminal, else kLines or kOff.
  static Mode mode_here(bool lines_elsewhere);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Work done so far in `phase` (total 0: unknown). Thread-safe.
  void update(std::string_view phase, int64_t done, int64_t total);

 private:
  void draw_locked();
  void tick();

  std::string line_locked() const;

  std::string what_;
  Mode mode_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_line_;
  std::string last_text_;
  std::string phase_;
  int64_t done_ = 0;
  int64_t total_ = 0;
  std::thread ticker_;
};

}  // namespace meshsim::cli
