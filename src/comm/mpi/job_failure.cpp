// One report for an error many ranks hit (see job_failure.h).
#include "comm/mpi/job_failure.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "comm/mpi/mpi_runtime.h"
#include "core/log.h"

namespace tessera {

namespace {
constexpr int kMessageBytes = 4096;  // a longer message is cut; its start names the problem

// Waits up to `seconds` for `req`; false on time-out (the request stays pending:
// the process is about to end).
bool wait_for(MPI_Request& req, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int done = 0;
  while (true) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}
}  // namespace

std::vector<RankGroup> group_equal_messages(const std::vector<std::string>& messages) {
  std::vector<RankGroup> groups;
  for (int r = 0; r < static_cast<int>(messages.size()); ++r) {
    RankGroup* g = nullptr;
    for (RankGroup& x : groups)
      if (x.message == messages[static_cast<size_t>(r)]) g = &x;
    if (!g) g = &groups.emplace_back(RankGroup{messages[static_cast<size_t>(r)], {}});
    g->ranks.push_back(r);
  }
  return groups;
}

std::string describe_ranks(const std::vector<int>& ranks, int world_size) {
  if (static_cast<int>(ranks.size()) == world_size && world_size > 1)
    return "all " + std::to_string(world_size) + " ranks";
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
  return out;
}

void end_job_on_error(MPI_Comm channel, const Status& status, int exit_code, double wait_s) {
  int rank = 0, size = 1;
  MPI_Comm_rank(channel, &rank);
  MPI_Comm_size(channel, &size);
  std::vector<char> mine(kMessageBytes, '\0'), all;
  const std::string text = status.to_string();
  std::memcpy(mine.data(), text.data(), std::min<size_t>(text.size(), kMessageBytes - 1));
  if (rank == 0) all.resize(static_cast<size_t>(kMessageBytes) * static_cast<size_t>(size));
  // Every rank gathers to rank 0, then waits for rank 0's word that the report is printed: a rank
  // that left early would make mpirun print its own abort notice over the report.
  MPI_Request gather = MPI_REQUEST_NULL;
  MPI_Igather(mine.data(), kMessageBytes, MPI_CHAR, all.data(), kMessageBytes, MPI_CHAR, 0, channel, &gather);
  if (!wait_for(gather, wait_s)) abort_job(status, exit_code);  // not every rank failed: name this one
  if (rank == 0) {
    std::vector<std::string> messages;
    for (int r = 0; r < size; ++r) messages.emplace_back(all.data() + static_cast<size_t>(r) * kMessageBytes);
    for (const RankGroup& g : group_equal_messages(messages))
      std::fprintf(stderr, "[%s] error: fatal: %s\n", describe_ranks(g.ranks, size).c_str(), g.message.c_str());
    std::fprintf(stderr, "the job ends with exit code %d\n", exit_code);
    std::fflush(stderr);
  }
  MPI_Request printed = MPI_REQUEST_NULL;
  MPI_Ibarrier(channel, &printed);
  (void)wait_for(printed, wait_s);
  MPI_Finalize();  // every rank is here: end cleanly, so mpirun adds no abort banner
  std::_Exit(exit_code);
}

}  // namespace tessera
