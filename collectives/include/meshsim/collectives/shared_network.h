// The network as a resource that transfers share, advanced in time by its user.
//
// A transfer is a coupled transfer (comm_shape.h): a latency, then `bytes` of progress at a rate
// the network grants, using `weight` bytes of every link of its shape per byte of progress, never
// faster than its cap, lasting at least its floor. The user starts transfers at the current time
// and advances the network to the next completion (or to a time limit, whichever comes first);
// whenever a transfer enters or leaves its bandwidth phase, the network re-shares the links among
// every transfer in flight. Two implementations, behind this one seam (docs/style.md A.5b):
//  * the fluid model (make_fluid_network): generalised max-min fairness by progressive filling,
//    in C++ (see fluid_network.cc for the algorithm, its complexity and its memo);
//  * SimGrid's model of parallel tasks (make_simgrid_network: the L07 "ptask" host model, one
//    ptask per transfer with its bytes on every link), in a child process: an independent
//    cross-check of the same sharing.
// Shapes are registered once (add_shape) and started many times: a training step repeats the
// same collectives thousands of times.
// Times are the network's own clock, starting at zero; `start` and `advance` never go back.
// A transfer id stays the caller's until the advance after the one that reported it finished
// (it may start new transfers while it handles a batch of completions); it may be reused then.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "meshsim/collectives/comm_shape.h"
#include "meshsim/sim/ids.h"
#include "meshsim/sim/units.h"

namespace meshsim::collectives {

using ShapeId = StrongId<struct ShapeTag>;

struct NetworkAdvance {
  SimTime time;                       // where the network's clock stands now
  std::vector<TransferId> finished;   // transfers that completed at `time`, in id order
};

// The rate the model assigned to one transfer, from `from` on (bytes of progress per second; it
// uses weight x that of each link of its shape), for utilisation counters. Reported whenever it
// changes, and 0 when its bytes are done.
struct TransferRate {
  SimTime from;
  TransferId transfer;
  ShapeId shape;
  double bytes_per_s = 0;
};

class SharedNetwork {
 public:
  virtual ~SharedNetwork() = default;
  virtual std::string_view name() const = 0;

  // Registers the loads and the rate cap of a shape (its latency, floor and bytes are given per
  // start). Registering the same loads and cap twice gives the same id.
  virtual ShapeId add_shape(const CommShape& shape) = 0;
  // Starts a transfer of `shape` at `now` (>= the network's clock). A transfer with no bytes or
  // no loads just waits out its latency (and floor).
  virtual TransferId start(SimTime now, ShapeId shape, Bytes bytes, Duration latency,
                           Duration floor) = 0;
  // Advances the clock to the earliest of `limit` and the next completion; reports what
  // completed then. With nothing in flight, the clock moves to `limit` (which must then be
  // finite; SimTime::max() means no limit).
  virtual NetworkAdvance advance(SimTime limit) = 0;
  // Transfers started and not yet reported finished.
  virtual size_t active() const = 0;
  // The network's clock.
  virtual SimTime now() const = 0;
  // Subscribes to transfer rate changes (the fluid model only; SimGrid reports none).
  virtual void on_rate(std::function<void(const TransferRate&)> callback) = 0;
};

// `capacities`: bytes/s per link of the network (link_capacities in comm_shape.h).
std::unique_ptr<SharedNetwork> make_fluid_network(std::vector<double> capacities);
std::unique_ptr<SharedNetwork> make_simgrid_network(std::vector<double> capacities);

// The time `shape` takes alone, run through `network` from its current clock (which it
// advances); the fluid model gives exactly isolated_time (comm_shape.h).
Duration run_alone(SharedNetwork& network, const CommShape& shape);

}  // namespace meshsim::collectives
