// Planted failures, run under mpiexec by expect_output.sh (see CMakeLists.txt for the checks):
//   hang           rank 1 skips all_reduce #2; the others' async wait times out (2 s) naming rank 1
//   hang_blocking  same with watch_blocking = true and a blocking barrier, at 2 ranks
//   mismatch       rank 2 hashes a different config; check_agreement names rank 2 on every rank
//   exit           rank 1 exits with code 3 while the others wait in a plain blocking barrier
//   abort          rank 1 calls abort_job with code 7 while the others wait in a barrier
//   throw          rank 1 throws an uncaught exception while the others wait in a barrier
//   abandon        rank 1 gets stuck; rank 0 abandons a sub-communicator (an op on it is refused)
//                  and destroys it without waiting for rank 1 (freeing its window would), then ends the job
// Every scenario must end the whole job with a non-zero exit code within seconds.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/agreement.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "core/log.h"

using namespace tessera;

namespace {

// A live rank reports and then ends the job; the short pause lets every live rank print first.
[[noreturn]] void report_and_abort(const Status& s) {
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  abort_job(s);
}

void stuck_forever() {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

}  // namespace

int main(int argc, char** argv) {
  MpiRuntime mpi;
  std::string scenario = argc > 1 ? argv[1] : "";
  CommOptions opt;
  opt.timeout_s = 2.0;
  opt.watch_blocking = scenario == "hang_blocking";
  auto made = MpiCommunicator::create_world(opt);
  if (!made.ok()) abort_job(made.status());
  MpiCommunicator& w = **made;
  std::vector<float> x(1000, 1.0f);
  Status s = w.all_reduce(x.data(), x.data(), 1000, DType::f32);  // #1: everyone
  if (!s.ok()) abort_job(s);

  if (scenario == "hang" || scenario == "hang_blocking") {
    if (w.rank() == 1) stuck_forever();  // skips #2, as a rank stuck in compute would
    s = scenario == "hang" ? w.all_reduce_async(x.data(), x.data(), 1000, DType::f32).wait() : w.barrier();
    if (s.ok()) {
      std::printf("unexpected: the collective completed without rank 1\n");
      return 0;
    }
    report_and_abort(s);  // the timeout itself has been logged with the rank label
  } else if (scenario == "mismatch") {
    std::string config = "n_layer=2 n_embd=64";
    if (w.rank() == 2) config = "n_layer=2 n_embd=96";
    s = check_agreement(w, "model config", agreement_hash(config));
    if (s.ok()) {
      std::printf("unexpected: agreement passed\n");
      return 0;
    }
    log_error(s.to_string());
    report_and_abort(s);
  } else if (scenario == "exit" || scenario == "abort" || scenario == "throw") {
    if (w.rank() == 1) {
      if (scenario == "exit") {
        std::fprintf(stderr, "rank 1 exits with code 3\n");
        std::exit(3);
      }
      if (scenario == "abort") abort_job(internal_error("planted failure on rank 1"), 7);
      throw std::runtime_error("planted exception on rank 1");
    }
    s = w.barrier();  // blocking, no timeout: only mpirun can end this rank
    std::printf("unexpected: barrier returned %s\n", s.to_string().c_str());
    return 0;
  } else if (scenario == "abandon") {
    auto sub = w.split(0, w.rank(), "world/sub");
    if (!sub.ok()) abort_job(sub.status());
    if (w.rank() == 1) stuck_forever();
    (*sub)->abandon();
    const Status refused = (*sub)->barrier();
    std::printf("rank %d: op on the abandoned communicator: %s\n", w.rank(), refused.to_string().c_str());
    const auto t0 = std::chrono::steady_clock::now();
    sub->reset();  // without abandon() this would wait in MPI_Win_free for rank 1 forever
    const double s_taken = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("rank %d released the abandoned communicator in %.3f s\n", w.rank(), s_taken);
    std::fflush(stdout);
    abort_job(internal_error("planted failure after abandoning"), 5);
  } else {
    std::fprintf(stderr, "usage: test_mpi_faults hang|hang_blocking|mismatch|exit|abort|throw|abandon\n");
    return 2;
  }
}
