// MPI start-up/shut-down and job abort.
#include "comm/mpi/mpi_runtime.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "comm/mpi/job_failure.h"
#include "core/log.h"

namespace tessera {

// How long abort_job gives MPI_Abort to end the job before the rank exits by itself.
constexpr int kAbortGraceSeconds = 3;

MpiRuntime::MpiRuntime(int thread_level) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // Started without a launcher, Open MPI 4.1 forks a helper daemon (orted) for the singleton, which
    // only process spawning needs; Tessera never spawns, and the daemon costs every one-process run
    // ~0.15 s. Only the singleton reads this variable (under mpirun or srun it is ignored); a user's
    // own setting wins.
    setenv("OMPI_MCA_ess_singleton_isolated", "1", /*overwrite=*/0);
    int requested = thread_level < 0 ? MPI_THREAD_FUNNELED : thread_level;
    MPI_Init_thread(nullptr, nullptr, requested, &provided_);
    owns_ = true;
  } else {
    MPI_Query_thread(&provided_);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  set_log_rank(rank_);
  // Collective, but every rank constructs the runtime first thing.
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node) == MPI_SUCCESS &&
      node != MPI_COMM_NULL) {
    MPI_Comm_size(node, &local_size_);
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_free(&node);
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &failure_channel_);
}

void MpiRuntime::end_job_on_error(const Status& status, int exit_code) const {
  if (failure_channel_ == MPI_COMM_NULL || size_ == 1) abort_job(status, exit_code);
  tessera::end_job_on_error(failure_channel_, status, exit_code);
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && failure_channel_ != MPI_COMM_NULL) MPI_Comm_free(&failure_channel_);
  if (owns_ && !finalized) MPI_Finalize();
}

void abort_job(const Status& status, int exit_code) {
  abort_job(status.to_string(), exit_code);
}

void abort_job(const std::string& message, int exit_code) {
  if (exit_code == 0) exit_code = 1;
  log_error("fatal: " + message + " -- aborting the job (exit code " + std::to_string(exit_code) + ")");
  std::fflush(stdout);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    // Ranks aborting at the same moment can garble mpirun's help-message aggregation (Open MPI 4.1:
    // "Data unpack would read past end of buffer in show_help.c", open-mpi/ompi#8356) and leave the
    // job running: the lowest rank aborts first, the others a little later, by when mpirun has
    // usually ended them.
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::this_thread::sleep_for(std::chrono::milliseconds(250 * std::min(rank, 8)));
    // Should MPI_Abort itself never return nor end the job (twice in CI a job whose other ranks
    // aborted while one hung outlived its deadline), leave without it: mpirun ends a job one of
    // whose ranks exits without MPI_Finalize.
    std::thread([exit_code] {
      std::this_thread::sleep_for(std::chrono::seconds(kAbortGraceSeconds));
      std::_Exit(exit_code);
    }).detach();
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
  std::_Exit(exit_code);
}

}  // namespace tessera
