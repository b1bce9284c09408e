// MpiRuntime: RAII for MPI_Init_thread / MPI_Finalize; abort_job: end the whole job from any rank.
//
// Thread level: we request MPI_THREAD_FUNNELED. Every MPI call comes from the thread that owns the
// communicators (the trainer's main thread): a communicator's collective order must be identical
// on every rank, which concurrent callers could not guarantee anyway, and async ops progress
// through Work::test()/wait() on that thread, so no progress thread is needed. THREAD_MULTIPLE
// would add locking on every message in Open MPI's ob1 path for nothing; it is available in the
// Debian Open MPI 4.1 build if a later design needs it (pass it to the constructor).
//
// Started without mpirun, MPI_Init makes a "singleton": a world of one (works with Open MPI 4.1).
#pragma once
#include <mpi.h>

#include <string>

#include "core/status.h"

namespace tessera {

class MpiRuntime {
 public:
  // thread_level: an MPI_THREAD_* value; the default is MPI_THREAD_FUNNELED.
  explicit MpiRuntime(int thread_level = -1);
  ~MpiRuntime();  // MPI_Finalize (collective: after a communication failure call abort_job instead)
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int world_rank() const { return rank_; }
  int world_size() const { return size_; }
  int thread_level() const { return provided_; }  // what MPI provided
  bool owns_init() const { return owns_; }
  // Ranks of this job on this machine (MPI_COMM_TYPE_SHARED), so a rank can share the cores with
  // its neighbours; asked of MPI rather than of a launcher's environment (mpirun, srun, hydra).
  int ranks_on_this_node() const { return local_size_; }
  int rank_on_this_node() const { return local_rank_; }  // 0 .. ranks_on_this_node() - 1
  // Ends the job on this rank's error with one report for all the ranks that hit it (job_failure.h).
  [[noreturn]] void end_job_on_error(const Status& status, int exit_code) const;

 private:
  int rank_ = 0, size_ = 1, provided_ = 0, local_size_ = 1, local_rank_ = 0;
  MPI_Comm failure_channel_ = MPI_COMM_NULL;  // a duplicate of the world for failure reports only
  bool owns_ = false;
};

// Logs "fatal: <status>" with the rank and ends the whole job with a non-zero exit code
// (MPI_Abort on MPI_COMM_WORLD: mpirun kills every other rank). Without MPI, exits the process.
// Open MPI's mpirun also ends the job when any rank exits non-zero or dies from a signal without
// MPI_Finalize, so an uncaught exception or a crash on one rank ends the job too; abort_job is the
// way to do it on purpose, with a message.
[[noreturn]] void abort_job(const Status& status, int exit_code = 1);
[[noreturn]] void abort_job(const std::string& message, int exit_code = 1);

}  // namespace tessera
