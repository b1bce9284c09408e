// How much of ring attention's communication hides behind attention: one forward + backward of a
// bench-small-width model (C 384, 6 heads of 64) with parallel.cp = P ring attention over the mpirun
// world, against the same exchanges with nothing to hide behind, in the same run.
//   exposed   = seconds a rank spent in ring_wait and ring_progress per step (ring_stats); a
//               rank also waits there for a slower peer, so the least over the ranks (the slowest
//               rank's, which waits for nobody's compute) is the bound on exposed communication
//   alone     = the step's exchanges (same count and size) timed back to back with no compute
//   hidden    = 1 - exposed (least over the ranks) / alone
// --mode ulysses times the same step under Ulysses (all-to-alls) for comparison (no hidden share).
// Usage: mpirun -np P bench_ring_attention [--seq 2048] [--layers 2] [--batch 1] [--steps 3]
//        [--mode ring|ulysses] [--threads 1] [--json out.json]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/transformer.h"
#include "parallel/context_parallel.h"
#include "bench_flags.h"
#include "timing.h"

using namespace tessera;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

using bench::median;

// The largest (slowest rank) or smallest value over the ranks.
double reduce_over(Communicator& world, double x, ReduceOp op) {
  float v = static_cast<float>(x);
  (void)world.all_reduce(&v, &v, 1, DType::f32, op);
  return v;
}
double max_over(Communicator& world, double x) { return reduce_over(world, x, ReduceOp::max); }

}  // namespace

int main(int argc, char** argv) {
  int64_t T = 2048, B = 1;
  int layers = 2, steps = 3, threads = 1;
  std::string mode_name = "ring", json_path, cpu_isa = "auto";
  const bench::Flags flags =
      bench::Flags("bench_ring_attention", "Run under mpirun -np P: how much of ring attention's exchange hides behind attention.")
          .option("--seq", &T, "tokens per sequence (split over the ranks)")
          .option("--layers", &layers, "layers of the bench-small-width model")
          .option("--batch", &B, "sequences per step")
          .option("--steps", &steps, "timed steps (medians)")
          .option("--mode", &mode_name, "ring or ulysses")
          .option("--threads", &threads, "OpenMP threads per rank")
          .cpu_isa(&cpu_isa)
          .option("--json", &json_path, "write the results here");
  if (const auto exit_code = flags.parse(argc, argv)) return *exit_code;
  MpiRuntime mpi;
  omp_set_num_threads(threads);
  auto world_or = MpiCommunicator::create_world();
  if (!world_or.ok()) { std::fprintf(stderr, "%s\n", world_or.status().message().c_str()); return 1; }
  Communicator& world = *world_or.value();
  const int P = world.size(), rank = world.rank();
  auto mode = parse_context_parallel_mode(mode_name);
  ModelConfig cfg = model_preset("bench-small").value();
  cfg.n_layer = layers;
  cfg.max_seq_len = std::max(cfg.max_seq_len, T);
  if (const Status s = validate_context_parallel(P, mode.ok() ? *mode : ContextParallelMode::ring, T, cfg.n_head,
                                                 cfg.n_kv_head, 1);
      !mode.ok() || !s.ok() || P < 2) {
    if (rank == 0)
      std::fprintf(stderr, "%s\n", !mode.ok() ? mode.status().message().c_str()
                                   : P < 2   ? "run under mpirun with 2 or more ranks (the cp group)"
                                             : s.message().c_str());
    return 2;
  }
  ParamStore store{ParamLayout(cfg)};
  init_parameters(store, cfg, 1234);
  CpuBackend backend;
  const int64_t Tl = T / P;
  Transformer net(backend, cfg, store, B, Tl);
  ContextParallel cp(world, *mode);
  net.set_context_parallel_hooks(&cp);
  std::vector<int32_t> tokens(B * Tl), targets(B * Tl);
  Rng rng(7 + rank);
  for (int64_t i = 0; i < B * Tl; ++i) {
    tokens[i] = static_cast<int32_t>(rng.next_u32() % cfg.vocab_size);
    targets[i] = static_cast<int32_t>(rng.next_u32() % cfg.vocab_size);
  }
  auto step = [&] {
    store.zero_grads();
    net.forward(tokens.data(), targets.data());
    net.backward();
    if (const Status s = cp.status(); !s.ok()) {
      std::fprintf(stderr, "[rank %d] %s\n", rank, s.message().c_str());
      std::exit(1);
    }
  };
  step();  // warm-up: first-call scratch
  std::vector<double> step_s;
  const RingStats before = cp.ring_stats();
  for (int s = 0; s < steps; ++s) {
    const auto t0 = Clock::now();
    step();
    step_s.push_back(seconds_since(t0));
  }
  const RingStats after = cp.ring_stats();
  const int64_t exchanges = (after.exchanges - before.exchanges) / steps;
  const int64_t floats_each = exchanges ? (after.floats - before.floats) / steps / exchanges : 0;
  const double in_wait = (after.wait_s - before.wait_s) / steps, in_progress = (after.progress_s - before.progress_s) / steps;
  const double wait = in_wait + in_progress;
  const double exposed = reduce_over(world, wait, ReduceOp::min), exposed_max = max_over(world, wait);
  const double step_time = max_over(world, median(step_s));

  // The same exchanges with nothing to overlap: back to back on channel 0.
  double alone = 0;
  if (exchanges > 0) {
    std::vector<float> send(floats_each, 1.f), recv(floats_each);
    cp.ring_start(0, send.data(), recv.data(), floats_each);  // warm-up
    cp.ring_wait(0);
    (void)world.barrier();
    const auto t0 = Clock::now();
    for (int s = 0; s < steps; ++s)
      for (int64_t e = 0; e < exchanges; ++e) {
        cp.ring_start(0, send.data(), recv.data(), floats_each);
        cp.ring_wait(0);
      }
    alone = max_over(world, seconds_since(t0) / steps);
  }
  const double least_wait = reduce_over(world, in_wait, ReduceOp::min);
  const double least_progress = reduce_over(world, in_progress, ReduceOp::min);
  if (rank != 0) return 0;
  const double hidden = alone > 0 ? 1.0 - exposed / alone : 0;
  std::printf("bench-small widths, %d layers, B %lld x T %lld over cp %d (%s), %d thread(s) per rank\n", layers,
              static_cast<long long>(B), static_cast<long long>(T), P, mode_name.c_str(), threads);
  std::printf("step (fwd+bwd) %.4f s", step_time);
  if (exchanges > 0)
    std::printf("; %lld exchanges of %.2f MiB per step: alone %.4f s, exposed %.4f s (least rank; most %.4f s) "
                "-> hidden %.1f %%",
                static_cast<long long>(exchanges), floats_each * 4.0 / 1048576.0, alone, exposed, exposed_max,
                100 * hidden);
  std::printf("\n");
  if (exchanges > 0)
    std::printf("least over the ranks: %.4f s per step in ring_wait, %.4f s in ring_progress\n", least_wait, least_progress);
  if (!json_path.empty()) {
    nlohmann::json j = {{"model", "bench-small"}, {"layers", layers}, {"batch", B},     {"seq_len", T},
                        {"cp", P},               {"mode", mode_name}, {"threads", threads}, {"step_s", step_time},
                        {"exchanges_per_step", exchanges}, {"bytes_per_exchange", floats_each * 4},
                        {"alone_s", alone},      {"exposed_s", exposed}, {"exposed_max_rank_s", exposed_max},
                        {"hidden_share", hidden}};
    std::ofstream(json_path) << j.dump(1) << "\n";
  }
  return 0;
}
