// Benchmark of one training step (forward + backward + clipping + AdamW) of one model on this machine:
// tokens/s, achieved GFLOP/s, MFU against the sgemm peak measured in the same process with the
// same thread count, peak memory, and a per-kernel-group time breakdown of one step. The step is
// the trainer's own train_step (train/train_step.h) on a world of one.
// Usage: bench_train_step --model gpt2 --batch 1 --seq 1024 --threads 2 --steps 5 [--cpu-isa auto|avx2|avx512|
// avx512_bf16] [--precision fp32|bf16] [--device cpu|cuda] [--json out.json]
// --precision is the trainer's train.precision (model/precision.h): the linear layers' operands rounded,
// f32 accumulation, master weights and optimizer in f32. MFU stays against the f32 sgemm peak; a bf16 run
// also reads the peak of the backend's bf16 matmul (same search, same size) and its MFU against that.
// --device cuda runs the step on the CUDA backend (docs/cuda.md): parameters initialised on the host and
// copied across, no sgemm peak (MFU 0), the breakdown timed by host clocks around asynchronous launches.
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu_isa.h"
#include "backend/sgemm_peak.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "core/memory.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/transformer.h"
#include "parallel/data_parallel.h"
#include "parallel/model_parallel_sync.h"
#include "parallel/pipeline_runner.h"
#include "train/train_step.h"
#include "bench_flags.h"

using namespace tessera;
using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int main(int argc, char** argv) {
  std::string model = "bench-tiny", json_path, cpu_isa = "auto", device_name_arg = "cpu", precision_arg = "fp32";
  int64_t B = 8, T = 256;
  int threads = 1, steps = 5;
  const bench::Flags flags = bench::Flags("bench_train_step", "One training step of a model: tokens/s, MFU, memory, a breakdown.")
                                 .option("--model", &model, "model preset")
                                 .option("--batch", &B, "sequences per step")
                                 .option("--seq", &T, "tokens per sequence")
                                 .option("--threads", &threads, "OpenMP threads")
                                 .option("--steps", &steps, "timed steps (the median is reported)")
                                 .cpu_isa(&cpu_isa)
                                 .option("--precision", &precision_arg, "fp32 or bf16 (train.precision)")
                                 .option("--device", &device_name_arg, "cpu or cuda")
                                 .option("--json", &json_path, "write the results here");
  if (const auto exit_code = flags.parse(argc, argv)) return *exit_code;
  const auto precision = parse_precision(precision_arg);
  if (!precision.ok() || precision.value() == Precision::fp16) {  // fp16 needs the trainer's loss scaler
    std::fprintf(stderr, "--precision %s: the step benchmark runs fp32 or bf16\n", precision_arg.c_str());
    return 2;
  }
  MpiRuntime mpi;  // a world of one: the step's data-parallel strategy then never communicates
  omp_set_num_threads(threads);
  auto cfg_or = model_preset(model);
  if (!cfg_or.ok()) { std::fprintf(stderr, "%s\n", cfg_or.status().message().c_str()); return 2; }
  ModelConfig cfg = cfg_or.value();
  cfg.max_seq_len = std::max(cfg.max_seq_len, T);

  auto device = parse_device(device_name_arg);
  if (!device.ok()) { std::fprintf(stderr, "%s\n", device.status().message().c_str()); return 2; }
  const bool on_cpu = device.value() == Device::cpu;
  auto backend_or = make_backend(device.value());
  if (!backend_or.ok()) { std::fprintf(stderr, "%s\n", backend_or.status().message().c_str()); return 2; }
  Backend& backend = *backend_or.value();
  // A large square sgemm: the practical peak for this thread count (the CPU's; none measured for a GPU).
  // Measured again after the steps and the higher kept: a reading taken while another process still
  // held a core (a benchmark run just before) comes out low and would inflate the MFU.
  double peak = on_cpu ? ops::measure_sgemm_peak_gflops(2048, 3) : 0.0;
  const bool lowp = precision.value() != Precision::fp32;
  auto lowp_peak_now = [&] { return ops::measure_lowp_peak_gflops(backend, precision.value(), 2048, 3); };
  double lowp_peak = on_cpu && lowp ? lowp_peak_now() : 0.0;
  // On the CPU host buffers, as the trainer's single process; on a device its memory, initialised on
  // the host and copied across.
  ParamStore store(ParamLayout(cfg), on_cpu ? StoreOptions{} : StoreOptions{.backend = &backend});
  if (on_cpu) {
    init_parameters(store, cfg, 1234);
  } else {
    ParamStore host{ParamLayout(cfg)};
    init_parameters(host, cfg, 1234);
    backend.copy_to_device(store.params(), host.params(), static_cast<size_t>(store.numel()) * sizeof(float));
  }
  auto world_or = MpiCommunicator::create_world();
  if (!world_or.ok()) { std::fprintf(stderr, "%s\n", world_or.status().message().c_str()); return 1; }
  Communicator& world = *world_or.value();
  // The trainer's set-up for dp alone (train/training_setup.cpp): the model-parallel strategy over a
  // DataParallel part, and the pipeline runner over one stage.
  ModelParallelSync sync(backend, ModelParallelGroups{&world, &world, &world}, {&store}, [&](ParamStore& s) {
    return std::make_unique<DataParallel>(backend, world, s, AdamWConfig{}, 4 << 20);
  });
  std::vector<int32_t> tokens(B * T), targets(B * T);
  Rng rng(7);
  for (int64_t i = 0; i < B * T; ++i) {
    tokens[i] = static_cast<int32_t>(rng.next_u32() % cfg.vocab_size);
    targets[i] = static_cast<int32_t>(rng.next_u32() % cfg.vocab_size);
  }
  Transformer* slot_model = nullptr;  // the runner's one activation slot (1F1B over one stage)
  PipelineRunner runner(
      backend, cfg, {&store}, B, T, Recompute::none, world, PipelineScheduleKind::one_f_one_b, PipelineShape{1, 1, 1}, sync,
      [&](int, Transformer& m) {
        slot_model = &m;
        m.set_precision(precision.value());
        ReplicaSync* part = &sync.chunk_sync(0);
        m.set_grad_ready_callback([part](int layer) { part->on_layer_ready(layer); });
      },
      [&](int32_t* in, int32_t* tg) {
        std::copy(tokens.begin(), tokens.end(), in);
        std::copy(targets.begin(), targets.end(), tg);
      });
  Transformer& net = *slot_model;
  StepHooks no_hooks;
  Timeline no_timeline(false, 0);
  StepParts parts{store, runner, sync, sync, no_hooks, no_timeline};
  int64_t step_number = 0;
  auto step = [&] {
    auto r = train_step(parts, ++step_number, 1e-4f, 1.0f);
    if (!r.ok()) { std::fprintf(stderr, "%s\n", r.status().message().c_str()); std::exit(1); }
    return r->loss;
  };
  step();  // warm-up: first-call scratch allocations
  std::vector<double> times;
  float loss = 0;
  for (int s = 0; s < steps; ++s) {
    auto t0 = Clock::now();
    loss = step();
    times.push_back(seconds_since(t0));
  }
  // One more step with per-kernel-group timing (the timers add a little overhead, so not in the median).
  net.profile().enabled = true;
  auto tp = Clock::now();
  step();
  const double t_profiled = seconds_since(tp);
  net.profile().enabled = false;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);  // before the second peak reading, whose matrices would add to it
  const double rss_mb = ru.ru_maxrss / 1024.0;
  if (on_cpu) peak = std::max(peak, ops::measure_sgemm_peak_gflops(2048, 3));
  if (on_cpu && lowp) lowp_peak = std::max(lowp_peak, lowp_peak_now());
  // The peak at the step's own precision: the f32 sgemm's, or the reduced-precision matmul's.
  const double precision_peak = lowp ? lowp_peak : peak;
  std::sort(times.begin(), times.end());
  const double t_step = times[times.size() / 2];
  const double tokens_per_s = B * T / t_step;
  const double gflops = cfg.flops_per_token(T) * B * T / t_step / 1e9;
  const double tracked_mb = memory_stats().total_peak / 1048576.0;
  std::printf("%-12s %s B=%-3lld T=%-5lld threads=%d  step %.4f s  %9.0f tok/s  %7.1f GFLOP/s  sgemm peak %6.1f  "
              "MFU %5.1f%%  peak RSS %7.0f MiB (tracked %7.0f MiB)  loss %.4f\n",
              model.c_str(), precision_arg.c_str(), (long long)B, (long long)T, threads, t_step, tokens_per_s, gflops, peak,
              peak > 0 ? 100.0 * gflops / peak : 0.0, rss_mb, tracked_mb, loss);
  if (lowp && lowp_peak > 0)
    std::printf("  %s matmul peak %.1f GFLOP/s, MFU against it %.1f%%\n", precision_arg.c_str(), lowp_peak,
                100.0 * gflops / lowp_peak);
  double accounted = 0;
  std::string breakdown = "{";
  std::printf("  breakdown of one step (%.4f s):", t_profiled);
  for (size_t g = 0; g < static_cast<size_t>(OpGroup::count); ++g) {
    const double sec = net.profile().seconds[g];
    accounted += sec;
    std::printf(" %s %.1f%%", std::string(op_group_name(static_cast<OpGroup>(g))).c_str(), 100 * sec / t_profiled);
    breakdown += (g ? ",\"" : "\"") + std::string(op_group_name(static_cast<OpGroup>(g))) + "\":" + std::to_string(sec);
  }
  std::printf(" optimizer+clip+zero %.1f%%\n", 100 * (t_profiled - accounted) / t_profiled);
  breakdown += ",\"optimizer_and_rest\":" + std::to_string(t_profiled - accounted) + "}";
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f) { std::perror(json_path.c_str()); return 1; }
    std::fprintf(f,
                 "{\"impl\":\"tessera\",\"device\":\"%s\",\"cpu_isa\":\"%s\",\"cpu_isa_summary\":\"%s\",\"precision\":\"%s\",\"model\":\"%s\","
                 "\"B\":%lld,\"T\":%lld,\"threads\":%d,\"step_s\":%.6f,"
                 "\"tokens_per_s\":%.2f,\"gflops\":%.2f,\"sgemm_peak_gflops\":%.2f,\"mfu\":%.4f,"
                 "\"precision_peak_gflops\":%.2f,\"mfu_at_precision\":%.4f,\"peak_rss_mb\":%.1f,"
                 "\"tracked_peak_mb\":%.1f,\"params\":%lld,\"breakdown_s\":%s}\n",
                 device_name_arg.c_str(), cpu_isa_name(active_cpu_isa()), cpu_isa_summary().c_str(), precision_arg.c_str(), model.c_str(), (long long)B, (long long)T,
                 threads, t_step, tokens_per_s, gflops, peak, peak > 0 ? gflops / peak : 0.0, precision_peak,
                 precision_peak > 0 ? gflops / precision_peak : 0.0, rss_mb, tracked_mb,
                 (long long)cfg.num_parameters(), breakdown.c_str());
    std::fclose(f);
  }
  return 0;
}
