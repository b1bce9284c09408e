// All-reduce bus bandwidth of the Communicator (blocking path, and async + wait) against raw
// MPI_Allreduce in the same run, 4 KiB .. 256 MiB. Run:
//   mpirun --allow-run-as-root --oversubscribe -np 2 build/bench/bench_allreduce [out.json]
// busbw = 2 (n-1)/n * bytes / time (NCCL's convention: comparable across rank counts).
// The three variants are interleaved iteration by iteration (order alternating) so background load
// hits them alike; each iteration's time is the slowest rank's. The table shows median times and
// the ratio as the median of per-iteration paired ratios mpi_time / comm_time (robust to load
// that drifts during a size's run; a shared machine is noisy).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "core/memory.h"
#include "bench_flags.h"
#include "mpi_timing.h"

using namespace tessera;

using bench::median;
using bench::time_once;

int main(int argc, char** argv) {
  std::string out_path = "bench_allreduce.json";
  const bench::Flags flags =
      bench::Flags("bench_allreduce", "Run under mpirun -np N: the Communicator's all-reduce against raw MPI_Allreduce.")
          .positional("OUT.json", &out_path, "write the results here");
  if (const auto exit_code = flags.parse(argc, argv)) return *exit_code;
  MpiRuntime mpi;
  auto made = MpiCommunicator::create_world();
  if (!made.ok()) abort_job(made.status());
  MpiCommunicator& comm = **made;
  int n = comm.size();
  bool root = comm.rank() == 0;
  const size_t max_bytes = size_t{256} << 20;
  Buffer buf(max_bytes, MemCategory::communication);
  float* x = static_cast<float*>(buf.data());
  std::fill(x, x + max_bytes / 4, 1.0f / 1024);  // sums stay finite however many iterations run

  nlohmann::json results = nlohmann::json::array();
  if (root) {
    std::printf("all-reduce f32 in place, %d ranks, busbw = 2(n-1)/n * bytes / time, medians\n", n);
    std::printf("%10s %6s %12s %12s %12s %8s %12s %8s\n", "bytes", "iters", "mpi GB/s", "comm GB/s", "async GB/s",
                "ratio", "mpi us", "async r");
  }
  double worst_ratio = 1e9;
  for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    int count = static_cast<int>(bytes / 4);
    // Many iterations where one is only microseconds long: the median ratio is noisy otherwise.
    int iters = bytes <= (size_t{256} << 10) ? 400 : bytes <= (size_t{1} << 20) ? 100 : bytes <= (size_t{16} << 20) ? 16 : 6;
    std::vector<double> t_mpi, t_comm, t_async;
    auto raw = [&] { MPI_Allreduce(MPI_IN_PLACE, x, count, MPI_FLOAT, MPI_SUM, comm.mpi_comm()); };
    auto blocking = [&] {
      Status s = comm.all_reduce(x, x, count, DType::f32);
      if (!s.ok()) abort_job(s);
    };
    auto async = [&] {
      Status s = comm.all_reduce_async(x, x, count, DType::f32).wait();
      if (!s.ok()) abort_job(s);
    };
    raw(), blocking(), async();  // warm-up (connections, buffers, page faults)
    std::vector<double> paired;
    for (int i = 0; i < iters; ++i) {
      if (i % 2 == 0) {
        t_mpi.push_back(time_once(raw));
        t_comm.push_back(time_once(blocking));
      } else {
        t_comm.push_back(time_once(blocking));
        t_mpi.push_back(time_once(raw));
      }
      t_async.push_back(time_once(async));
      paired.push_back(t_mpi.back() / t_comm.back());
    }
    double f = 2.0 * (n - 1) / n * static_cast<double>(bytes) / 1e9;
    double m = median(t_mpi), c = median(t_comm), a = median(t_async);
    double ratio = median(paired);  // = busbw(comm) / busbw(mpi)
    worst_ratio = std::min(worst_ratio, ratio);
    if (root) {
      std::printf("%10zu %6d %12.2f %12.2f %12.2f %8.3f %12.1f %8.3f\n", bytes, iters, f / m, f / c, f / a, ratio,
                  m * 1e6, m / a);
      results.push_back({{"bytes", bytes}, {"iters", iters}, {"mpi_busbw_gbs", f / m}, {"comm_busbw_gbs", f / c},
                         {"async_busbw_gbs", f / a}, {"ratio_comm_vs_mpi", ratio}, {"ratio_async_vs_mpi", m / a},
                         {"mpi_median_s", m}, {"comm_median_s", c}, {"async_median_s", a}});
    }
  }
  if (root) {
    std::printf("worst comm/mpi ratio: %.3f (target >= 0.95)\n", worst_ratio);
    nlohmann::json doc = {{"benchmark", "allreduce"}, {"ranks", n}, {"dtype", "f32"},
                          {"reference", "MPI_Allreduce (same run, interleaved)"}, {"results", results}};
    std::ofstream(out_path) << doc.dump(2) << "\n";
    std::printf("wrote %s\n", out_path.c_str());
  }
  return 0;
}
