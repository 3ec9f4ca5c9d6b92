// Runs a computation in a forked child process and brings back its result (a vector of doubles).
//
// Why a child: SimGrid's engine is a process-wide singleton that cannot be rebuilt after a run, and
// meshsim keeps no global state (STYLE A.3): every batch of steps gets a fresh process, so any
// number of backends on any networks can run in one process, one after another or from several
// threads. The child is a fork, so it sees the caller's memory (the plan) as it was at the call,
// copy-on-write, and nothing it does reaches back into the caller.
//
// Protocol: the child runs `work`, writes a framed message to a pipe (the result, or the text of
// the exception it threw) and leaves with _exit (no atexit handlers, no destructors of the
// caller's objects, no flushing of the caller's stdio buffers). Its stdout and stderr go to a
// second pipe that the caller keeps: SimGrid's own diagnostics, shown only when the child fails.
// Every other descriptor is closed in the child, so a concurrent fork elsewhere cannot hold our
// pipes open.
//
// Caveat: the child of a multithreaded caller has only the calling thread; `work` must not need
// locks that other threads of the caller may hold (glibc keeps malloc usable after fork; SimGrid
// has not been started in the caller, so it holds none).
#pragma once

#include <functional>
#include <string_view>
#include <vector>

namespace meshsim::collectives::detail {

// Runs `work` in a child process and returns what it returned. Throws InternalError naming `what`
// when the child throws (with the exception's message), dies (with its exit status or signal and
// the tail of its stderr), or the process cannot be created.
std::vector<double> run_in_child(std::string_view what,
                                 const std::function<std::vector<double>()>& work);

}  // namespace meshsim::collectives::detail
