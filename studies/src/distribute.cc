// The single-process Distributor, and the choice between it and MPI (distribute_mpi.cc).
#include <cstdlib>

#include "meshsim/studies/distribute.h"

namespace meshsim::studies {

#ifdef MESHSIM_HAVE_MPI
std::unique_ptr<Distributor> make_mpi_distributor();  // distribute_mpi.cc
#endif

namespace {

class SingleProcess : public Distributor {
 public:
  int64_t rank() const override { return 0; }
  int64_t size() const override { return 1; }
  std::vector<std::string> all_gather(const std::string& mine) override { return {mine}; }
  std::string describe() const override { return "one process"; }
};

}  // namespace

bool mpi_built_in() {
#ifdef MESHSIM_HAVE_MPI
  return true;
#else
  return false;
#endif
}

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(var) != nullptr) {
      return true;
    }
  }
  return false;
}

std::unique_ptr<Distributor> make_single_process() { return std::make_unique<SingleProcess>(); }

std::unique_ptr<Distributor> make_distributor() {
#ifdef MESHSIM_HAVE_MPI
  if (launched_by_mpi()) {
    return make_mpi_distributor();
  }
#endif
  return make_single_process();
}

}  // namespace meshsim::studies
