// A progress line on stderr for anything that takes more than a second or two (plan search,
// sweeps, a full simulation): "meshsim: simulating 12/340 plans (3 s)". Quiet when stderr is not
// a terminal (CI, redirects), and silent for the first second, so quick runs print nothing. A
// ticker thread refreshes the elapsed time when no update comes (a long single simulation); the
// line is erased when the work ends.
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
  // `enabled` defaults to whether stderr is a terminal.
  explicit Progress(std::string what);
  Progress(std::string what, bool enabled);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Work done so far in `phase` (total 0: unknown). Thread-safe.
  void update(std::string_view phase, int64_t done, int64_t total);

 private:
  void draw_locked();
  void tick();

  std::string what_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool drawn_ = false;
  std::string phase_;
  int64_t done_ = 0;
  int64_t total_ = 0;
  std::thread ticker_;
};

}  // namespace meshsim::cli
