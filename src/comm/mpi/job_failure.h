// Ending a many-rank job on an error with one readable report. Ranks that fail at the same point
// (a bad config, a missing dataset) would each print the same message and Open MPI would add its
// abort banner; instead the failing ranks meet on a communicator kept for this alone, rank 0 prints
// each distinct message once with the ranks that hit it, and the job ends with the error's exit
// code. When not every rank arrives in time (the others are healthy, or stuck elsewhere), each
// failing rank reports its own error, named, and aborts the job as before.
#pragma once
#include <mpi.h>

#include <string>
#include <vector>

#include "core/status.h"

namespace tessera {

// One distinct message and the world ranks that reported it.
struct RankGroup {
  std::string message;
  std::vector<int> ranks;
};

// Groups equal messages (by first appearance); messages[r] is world rank r's.
std::vector<RankGroup> group_equal_messages(const std::vector<std::string>& messages);
// "rank 2", "ranks 0,1,3", "all 4 ranks".
std::string describe_ranks(const std::vector<int>& ranks, int world_size);

// Ends the job; `channel` is a duplicate of MPI_COMM_WORLD used for nothing else (MpiRuntime's).
[[noreturn]] void end_job_on_error(MPI_Comm channel, const Status& status, int exit_code, double wait_s = 3.0);

}  // namespace tessera
