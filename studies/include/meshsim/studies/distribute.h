// Work split over processes: under `mpirun -n K` (Open MPI; the build finds it with
// find_package(MPI) and works without it) every process takes a share of the work and rank 0
// gathers the results; otherwise one process does everything. Only the sweep and plan commands
// start MPI, and only when launched by an MPI launcher (its environment says so), so a plain
// `meshsim` never pays for MPI_Init.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace meshsim::studies {

class Distributor {
 public:
  virtual ~Distributor() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  // Every process's text in rank order, on every process.
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
  // A short description: "MPI, 4 processes" or "one process".
  virtual std::string describe() const = 0;
};

// Whether this build has MPI.
bool mpi_built_in();
// Whether the process was started by an MPI launcher (OMPI_COMM_WORLD_SIZE, PMI_SIZE or
// PMIX_RANK in the environment).
bool launched_by_mpi();
// MPI when built in and launched by mpirun (MPI_Init now, MPI_Finalize when destroyed); else one
// process.
std::unique_ptr<Distributor> make_distributor();
std::unique_ptr<Distributor> make_single_process();

}  // namespace meshsim::studies
