// The MPI Distributor (compiled when the build found MPI): MPI_Init on construction,
// MPI_Finalize on destruction; texts exchanged with MPI_Allgather (lengths) and MPI_Allgatherv.
#include <mpi.h>

#include <fmt/format.h>

#include <climits>

#include "meshsim/sim/error.h"
#include "meshsim/studies/distribute.h"

namespace meshsim::studies {
namespace {

void check(int code, const char* what) {
  if (code != MPI_SUCCESS) {
    throw InternalError(fmt::format("{} failed with MPI error {}", what, code));
  }
}

class MpiDistributor : public Distributor {
 public:
  MpiDistributor() {
    int initialized = 0;
    check(MPI_Initialized(&initialized), "MPI_Initialized");
    if (initialized == 0) {
      check(MPI_Init(nullptr, nullptr), "MPI_Init");
    }
    int rank = 0;
    int size = 1;
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
    rank_ = rank;
    size_ = size;
  }
  ~MpiDistributor() override { MPI_Finalize(); }
  MpiDistributor(const MpiDistributor&) = delete;
  MpiDistributor& operator=(const MpiDistributor&) = delete;

  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }
  std::string describe() const override { return fmt::format("MPI, {} processes", size_); }

  std::vector<std::string> all_gather(const std::string& mine) override {
    SIM_CHECK(mine.size() < static_cast<size_t>(INT_MAX), "{} bytes to gather", mine.size());
    const int length = static_cast<int>(mine.size());
    std::vector<int> lengths(static_cast<size_t>(size_));
    check(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD),
          "MPI_Allgather");
    std::vector<int> offsets(lengths.size());
    int64_t total = 0;
    for (size_t i = 0; i < lengths.size(); ++i) {
      offsets[i] = static_cast<int>(total);
      total += lengths[i];
    }
    SIM_CHECK(total < INT_MAX, "{} bytes to gather", total);
    std::string all(static_cast<size_t>(total), '\0');
    check(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(),
                         offsets.data(), MPI_CHAR, MPI_COMM_WORLD),
          "MPI_Allgatherv");
    std::vector<std::string> out;
    for (size_t i = 0; i < lengths.size(); ++i) {
      out.push_back(all.substr(static_cast<size_t>(offsets[i]), static_cast<size_t>(lengths[i])));
    }
    return out;
  }

 private:
  int64_t rank_ = 0;
  int64_t size_ = 1;
};

}  // namespace

std::unique_ptr<Distributor> make_mpi_distributor() { return std::make_unique<MpiDistributor>(); }

}  // namespace meshsim::studies
