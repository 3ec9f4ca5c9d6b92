// Streaming writer of the Chrome JSON trace format (opens in ui.perfetto.dev and chrome://tracing).
//
// The writer subscribes to the engine's signals and writes each op as a complete ("X") event the
// moment it ends, so the trace is never held in memory. Tracks: one process per rank (named
// by the caller, e.g. "node 0 / gpu 3"), one thread per stream ("compute", "comm 1", ...), and a
// counter track "memory" per rank. Timestamps are microseconds with six decimals (exact to the
// picosecond), so the output is byte-for-byte deterministic.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "meshsim/sim/simulation.h"

namespace meshsim::traces {

struct ChromeTraceOptions {
  // Which ranks to write; all when empty.
  std::function<bool(RankId)> include_rank;
  // Process name of a rank's track group.
  std::function<std::string(RankId)> rank_name;
  // Key/value pairs written as the trace's metadata (scenario, version).
  std::vector<std::pair<std::string, std::string>> metadata;
};

class ChromeTraceWriter {
 public:
  // Subscribes to `sim`; `out` must outlive the simulation run and `finish()`.
  ChromeTraceWriter(Simulation& sim, std::ostream& out, ChromeTraceOptions options);
  ~ChromeTraceWriter();
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

  // Writes track names and closes the JSON document. Call after Simulation::run().
  void finish();
  uint64_t events_written() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Microseconds with exactly six decimals, from integer picoseconds (no floating point).
std::string format_us(SimTime t);
std::string format_us(Duration d);

}  // namespace meshsim::traces
