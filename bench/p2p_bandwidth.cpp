// Raw MPI point-to-point bandwidth between ranks 0 and 1 (others idle): one direction (0 -> 1) and
// both at once (per direction), 4 KiB .. 4 MiB messages (--max-bytes), a window of 8 in flight. Made to check the
// slow-network bed's tc rate (bench/netbed/check_rate.sh) but runs under any mpirun:
//   mpirun --allow-run-as-root -np 2 build/bench/bench_p2p_bandwidth [--seconds S] [--max-bytes B] [--json out.json]
// MB/s = 1e6 bytes per second; each size runs for about S seconds (default 1) after one warm-up window.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_flags.h"

namespace {

constexpr int kWindow = 8;
constexpr int kTagData = 1, kTagAck = 2;

// One window: rank 0 (and rank 1 too when both_ways) sends kWindow messages of `bytes` to its peer,
// then each side waits for the peer's zero-byte ack that all arrived (so the time covers delivery).
void window(int rank, size_t bytes, bool both_ways, std::vector<char>& send, std::vector<char>& recv) {
  int peer = 1 - rank;
  bool sends = rank == 0 || both_ways, receives = rank == 1 || both_ways;
  std::vector<MPI_Request> reqs;
  for (int i = 0; i < kWindow; ++i) {
    char* slot = recv.data() + (i % 2) * bytes;  // two receive slots: contents are never read
    if (receives) MPI_Irecv(slot, static_cast<int>(bytes), MPI_CHAR, peer, kTagData, MPI_COMM_WORLD, &reqs.emplace_back());
    if (sends) MPI_Isend(send.data(), static_cast<int>(bytes), MPI_CHAR, peer, kTagData, MPI_COMM_WORLD, &reqs.emplace_back());
  }
  MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  if (receives) MPI_Send(nullptr, 0, MPI_CHAR, peer, kTagAck, MPI_COMM_WORLD);
  if (sends) MPI_Recv(nullptr, 0, MPI_CHAR, peer, kTagAck, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

// MB/s per direction for one size, running about `seconds` (rank 0 picks the window count from a
// timed warm-up window and tells rank 1, so both loop the same number of times).
double measure(int rank, size_t bytes, bool both_ways, double seconds, std::vector<char>& send, std::vector<char>& recv) {
  MPI_Comm pair = MPI_COMM_WORLD;
  double t0 = MPI_Wtime();
  window(rank, bytes, both_ways, send, recv);
  int windows = 0;
  if (rank == 0) {
    double one = MPI_Wtime() - t0;
    windows = static_cast<int>(seconds / (one > 1e-6 ? one : 1e-6));
    windows = windows < 2 ? 2 : windows > 100000 ? 100000 : windows;
    MPI_Send(&windows, 1, MPI_INT, 1, 0, pair);
  } else {
    MPI_Recv(&windows, 1, MPI_INT, 0, 0, pair, MPI_STATUS_IGNORE);
  }
  t0 = MPI_Wtime();
  for (int w = 0; w < windows; ++w) window(rank, bytes, both_ways, send, recv);
  double dt = MPI_Wtime() - t0;
  return static_cast<double>(bytes) * kWindow * windows / dt / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 1.0;
  int64_t max_bytes_arg = int64_t{4} << 20;
  std::string json_path;
  const tessera::bench::Flags flags =
      tessera::bench::Flags("bench_p2p_bandwidth", "Run under mpirun -np 2: raw MPI point-to-point bandwidth between ranks 0 and 1.")
          .option("--seconds", &seconds, "time per message size")
          .option("--max-bytes", &max_bytes_arg, "largest message")
          .option("--json", &json_path, "write the results here");
  if (const auto exit_code = flags.parse(argc, argv)) return *exit_code;
  if (seconds <= 0) {
    std::fprintf(stderr, "bench_p2p_bandwidth: --seconds must be above 0\n%s", flags.usage().c_str());
    return 2;
  }
  const auto max_bytes = static_cast<size_t>(max_bytes_arg);
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    std::fprintf(stderr, "bench_p2p_bandwidth needs at least 2 ranks (mpirun -np 2); got %d\n", size);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (max_bytes < 4096 || max_bytes > (size_t{1} << 30)) {
    if (rank == 0) std::fprintf(stderr, "--max-bytes must be 4096 .. 2^30\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  std::vector<char> send(max_bytes, 1), recv(2 * max_bytes);
  nlohmann::json rows = nlohmann::json::array();
  if (rank == 0) std::printf("%10s %16s %22s\n", "bytes", "0->1 MB/s", "both ways MB/s (each)");
  for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    double one = 0, both = 0;
    if (rank < 2) {
      one = measure(rank, bytes, false, seconds, send, recv);
      both = measure(rank, bytes, true, seconds, send, recv);
    }
    if (rank == 0) {
      std::printf("%10zu %16.2f %22.2f\n", bytes, one, both);
      std::fflush(stdout);
      rows.push_back({{"bytes", bytes}, {"one_way_MBps", one}, {"both_ways_MBps_each", both}});
    }
  }
  if (rank == 0 && !json_path.empty()) {
    std::ofstream out(json_path);
    out << rows.dump(1) << "\n";
    if (!out) {
      std::fprintf(stderr, "cannot write %s: check the directory exists and is writable\n", json_path.c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Finalize();
  return 0;
}
