// Non-blocking all-reduce in place against out of place, raw MPI and through the Communicator, in
// one run: Open MPI 4.1's libnbc runs a binomial tree for every in-place MPI_Iallreduce (and every
// one below 4 ranks) and Rabenseifner out of place (p >= 4, >= 64 KiB); from 64 KiB the Communicator
// pins Rabenseifner in place at >= 4 ranks, the ring at 2-3 (comm/mpi/libnbc_allreduce.h). Run
// across the slow-network bed, e.g.
//   bench/netbed/mpirun.sh --ranks 4 --rate 100mbit -- build/bench/bench_iallreduce_in_place 1048576 out.json
// Args: [max_bytes (default 4 MiB)] [out.json]. f32 sum; each iteration's time is the slowest rank's;
// variants interleaved (order rotating) so background load hits them alike; medians; raw requests are
// polled like the Communicator's.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "core/memory.h"
#include "bench_flags.h"
#include "mpi_timing.h"

using namespace tessera;

namespace {

using bench::median;
using bench::time_once;

// Polled as MpiWork::wait polls (MPI_Test, yields, then short sleeps), so that the columns differ by
// algorithm only: a spinning MPI_Wait takes the core an oversubscribed peer needs (3x slower here).
void wait_raw(MPI_Request* req) {
  int flag = 0, polls = 0;
  while (true) {
    if (MPI_Test(req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) abort_job(comm_error("MPI_Test failed"));
    if (flag) return;
    if (++polls < 200)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(polls < 2000 ? 20 : 200));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t max_bytes_arg = int64_t{4} << 20;
  std::string out_path = "bench_iallreduce_in_place.json";
  const bench::Flags flags =
      bench::Flags("bench_iallreduce_in_place", "Run under mpirun -np N: non-blocking all-reduce in place against out of place.")
          .positional("MAX_BYTES", &max_bytes_arg, "largest message")
          .positional("OUT.json", &out_path, "write the results here");
  if (const auto exit_code = flags.parse(argc, argv)) return *exit_code;
  if (max_bytes_arg < 4) {
    std::fprintf(stderr, "bench_iallreduce_in_place: MAX_BYTES must be at least 4\n%s", flags.usage().c_str());
    return 2;
  }
  const auto max_bytes = static_cast<size_t>(max_bytes_arg);
  MpiRuntime mpi;
  auto made = MpiCommunicator::create_world();
  if (!made.ok()) abort_job(made.status());
  MpiCommunicator& comm = **made;
  const int n = comm.size();
  const bool root = comm.rank() == 0;
  Buffer a(max_bytes, MemCategory::communication), b(max_bytes, MemCategory::communication);
  float* x = a.as<float>();
  float* y = b.as<float>();
  std::fill(x, x + max_bytes / 4, 1.0f / 1024);
  std::fill(y, y + max_bytes / 4, 1.0f / 1024);
  const LibnbcAllreduceKnob& knob = comm.allreduce_knob();

  nlohmann::json results = nlohmann::json::array();
  if (root) {
    std::printf("MPI_Iallreduce f32 sum, %d ranks; knob %s; medians in ms (slowest rank)\n", n,
                knob.usable() ? "usable" : ("unusable: " + knob.why_not()).c_str());
    std::printf("%10s %6s %14s %14s %14s %10s %16s\n", "bytes", "iters", "raw in place", "raw out of pl",
                "comm in place", "comm alg", "in place / comm");
  }
  for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    const int count = static_cast<int>(bytes / 4);
    auto raw_in = [&] {
      MPI_Request r;
      MPI_Iallreduce(MPI_IN_PLACE, x, count, MPI_FLOAT, MPI_SUM, comm.mpi_comm(), &r);
      wait_raw(&r);
    };
    auto raw_out = [&] {
      MPI_Request r;
      MPI_Iallreduce(x, y, count, MPI_FLOAT, MPI_SUM, comm.mpi_comm(), &r);
      wait_raw(&r);
    };
    auto comm_in = [&] {
      Status s = comm.all_reduce_async(x, x, count, DType::f32).wait();
      if (!s.ok()) abort_job(s);
    };
    std::vector<std::function<void()>> ops = {raw_in, raw_out, comm_in};
    for (auto& op : ops) op();  // warm-up (connections, page faults)
    const std::string alg(comm.recent_ops().back().algorithm);
    // Iterations: about 4 s per variant at the first measured speed, 7 .. 200.
    const double first = time_once(raw_in);
    int iters = std::clamp(static_cast<int>(4.0 / std::max(first, 1e-6)), 7, 200);
    MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::vector<std::vector<double>> t(ops.size());
    for (int i = 0; i < iters; ++i)
      for (size_t k = 0; k < ops.size(); ++k) {
        const size_t v = (k + i) % ops.size();
        t[v].push_back(time_once(ops[v]));
      }
    const double ti = median(t[0]), to = median(t[1]), tc = median(t[2]);
    if (root) {
      std::printf("%10zu %6d %14.3f %14.3f %14.3f %10s %16.2f\n", bytes, iters, ti * 1e3, to * 1e3, tc * 1e3,
                  alg.empty() ? "library" : alg.c_str(), ti / tc);
      results.push_back({{"bytes", bytes}, {"iters", iters}, {"raw_in_place_ms", ti * 1e3},
                         {"raw_out_of_place_ms", to * 1e3}, {"comm_in_place_ms", tc * 1e3},
                         {"comm_algorithm", alg.empty() ? "library" : alg}, {"speedup_comm_vs_raw_in_place", ti / tc}});
    }
  }
  if (root) {
    nlohmann::json doc = {{"benchmark", "iallreduce_in_place"}, {"ranks", n}, {"dtype", "f32"},
                          {"knob_usable", knob.usable()}, {"knob_why_not", knob.why_not()},
                          {"reference", "raw MPI_Iallreduce in place (libnbc default), same run, interleaved"},
                          {"results", results}};
    std::ofstream(out_path) << doc.dump(2) << "\n";
    std::printf("wrote %s\n", out_path.c_str());
  }
  return 0;
}
