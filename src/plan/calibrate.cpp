// Measurements behind `tessera plan --calibrate` (see calibrate.h).
#include "plan/calibrate.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/ops.h"
#include "backend/sgemm_peak.h"
#include "core/aligned_vector.h"
#include "core/memory.h"
#include "model/param_layout.h"
#include "model/op_profile.h"
#include "model/transformer.h"
#include "plan/op_costs.h"

namespace tessera {

namespace {

// The largest exchange timed: a small model's whole gradient (past the caches, where rates settle).
constexpr int64_t kLargestExchangeBytes = int64_t{64} << 20;

// Best of `reps` timings of fn, each over as many calls as fill 2 ms (a single call of a small op is
// shorter than the clock's and the scheduler's granularity).
double seconds_of(const std::function<void()>& fn, int reps) {
  using clock = std::chrono::steady_clock;
  fn();  // warm-up: first-touch pages, oneDNN's kernel choice
  int calls = 0;
  for (auto t0 = clock::now(); std::chrono::duration<double>(clock::now() - t0).count() < 2e-3; ++calls) fn();
  calls = std::max(calls, 1);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = clock::now();
    for (int i = 0; i < calls; ++i) fn();
    best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count() / calls);
  }
  return best;
}

// The calibration_matmul_shape for s, forward and backward, as the layers call them: through a
// CpuBackend, whose workspace keeps sgemm's padded copies between calls (sgemm_padded.h).
double matmul_rate(int64_t s, int64_t width, int reps) {
  const MatmulShape shape = calibration_matmul_shape(s, width);
  const int64_t N = shape.rows, C = shape.in, OC = shape.out;
  std::vector<float> x(N * C, 0.5f), w(OC * C, 0.25f), y(N * OC), dy(N * OC, 0.1f), dx(N * C), dw(OC * C);
  CpuBackend backend;
  const double t = seconds_of(
      [&] {
        backend.matmul_forward(y.data(), x.data(), w.data(), nullptr, N, C, OC);
        backend.matmul_backward(dx.data(), dw.data(), nullptr, dy.data(), x.data(), w.data(), N, C, OC);
      },
      reps);
  return 3 * 2.0 * N * C * OC / t;
}

// The generic probe: tiny's family at 2 layers of width 128 (d_ff 512), micro-batch 4 x 64, one
// thread, its tensors well beyond the first cache levels like a real model's.
CalibrationProbe generic_probe() {
  CalibrationProbe p;
  p.model = model_preset("tiny").value();
  p.model.n_layer = 2;
  p.model.d_model = 128;
  p.model.d_ff = 512;
  p.micro_batch = 4;
  p.seq_len = 64;
  return p;
}

// FLOP/s of the CPU backend's bf16 matmul (oneDNN's native kernel where the CPU has one, else the
// operands rounded through the f32 sgemm), square like the sgemm peak: what a run at train.precision
// "bf16" multiplies at.
double bf16_peak_flops(int reps) {
  CpuBackend backend;
  return 1e9 * ops::measure_lowp_peak_gflops(backend, ops::MatmulPrecision::bf16, 1024, reps);
}

// Seconds of the probe model's forward + backward: the median of as many calls as fit in `budget`
// seconds (at least one, at most 15) after a first call (oneDNN choosing its kernels). A median, not
// the best: the prediction is for a run's typical step, and a single best-of call on a noisy
// machine read bench-small's compute 15-25 % apart between runs whose steps measured the same.
// Its ops are timed by class as well (the mean call's): matmuls and attention as themselves, every
// other profiled group (norms, activations, residuals, the loss, the embedding) memory-bound.
ProbeClassTimes probe_step_timing(const CalibrationProbe& p, double budget) {
  const ModelConfig& m = p.model;
  const int64_t B = p.micro_batch, T = p.seq_len;
  ParamStore store{ParamLayout(m)};
  init_parameters(store, m, 1);
  CpuBackend backend;
  Transformer net(backend, m, store, B, T);
  net.set_precision(p.precision);
  net.profile().enabled = true;  // a clock read around each op: nanoseconds against the probe's milliseconds
  std::vector<int32_t> tokens(B * T), targets(B * T);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((7 * i) % m.vocab_size);
    targets[i] = static_cast<int32_t>((7 * i + 1) % m.vocab_size);
  }
  auto step = [&] {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    store.zero_grads();
    net.forward(tokens.data(), targets.data());
    net.backward();
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  const double first = step();
  const int calls = std::clamp(static_cast<int>(budget / std::max(first, 1e-6)), 1, 15);
  // Each call's step and op classes; the median call is kept whole, so its classes add up to its
  // step, and a call slowed by a busy moment shifts no class's share (a mean over the calls'
  // profiles gave the slow call's classes weight against the median step).
  std::vector<ProbeClassTimes> t;
  for (int i = 0; i < calls; ++i) {
    net.profile().reset();
    ProbeClassTimes c;
    c.step_s = step();
    for (size_t g = 0; g < static_cast<size_t>(OpGroup::count); ++g) {
      const double s = net.profile().seconds[g];
      if (static_cast<OpGroup>(g) == OpGroup::matmul) c.matmul_s += s;
      else if (static_cast<OpGroup>(g) == OpGroup::attention) c.attention_s += s;
      else c.memory_s += s;
    }
    t.push_back(c);
  }
  std::nth_element(t.begin(), t.begin() + static_cast<ptrdiff_t>(t.size() / 2), t.end(),
                   [](const ProbeClassTimes& a, const ProbeClassTimes& b) { return a.step_s < b.step_s; });
  return t[t.size() / 2];
}

}  // namespace

void set_compute_scales(HardwareSpec& h, const ProbeClassTimes& measured, const ProbeClassTimes& predicted) {
  auto ratio = [](double m, double p) { return p > 0 ? std::clamp(m / p, 0.25, 8.0) : 0.0; };
  const double predicted_total = predicted.matmul_s + predicted.attention_s + predicted.memory_s;
  h.compute_scale = predicted_total > 0 ? ratio(measured.step_s, predicted_total) : 1.0;
  // The time between the profiled ops (bookkeeping, the clock itself) goes to the classes pro rata.
  const double profiled = measured.matmul_s + measured.attention_s + measured.memory_s;
  const double spread = profiled > 0 ? measured.step_s / profiled : 0;
  h.matmul_scale = spread > 0 ? ratio(measured.matmul_s * spread, predicted.matmul_s) : 0;
  h.attention_scale = spread > 0 ? ratio(measured.attention_s * spread, predicted.attention_s) : 0;
  h.memory_op_scale = spread > 0 ? ratio(measured.memory_s * spread, predicted.memory_s) : 0;
}

namespace {

// The probe's measured step and its classes against the op model's for it on `h` (scales still unset).
void measure_compute_scales(HardwareSpec& h, const CalibrationProbe& probe, double budget) {
  const ModelConfig& m = probe.model;
  const ProbeClassTimes measured = probe_step_timing(probe, budget);
  // The probe's buffers are freed: its peak is not the caller's (a run's memory metrics start here).
  reset_memory_peaks();
  const ChunkOps ops = chunk_ops(m, 0, m.n_layer, true, 1, false, probe.micro_batch, probe.seq_len, Recompute::none);
  ProbeClassTimes predicted;
  for (const std::vector<OpCost>* list : {&ops.forward, &ops.backward}) {
    // op_seconds: no scale applied
    const std::array<double, 3> s = seconds_by_class(*list, h, precision_name(probe.precision));
    predicted.matmul_s += s[static_cast<size_t>(OpClass::matmul)];
    predicted.attention_s += s[static_cast<size_t>(OpClass::attention)];
    predicted.memory_s += s[static_cast<size_t>(OpClass::memory)];
  }
  set_compute_scales(h, measured, predicted);
}

// The rate at which pages handed back to the OS come back when written, as ZeRO's paged buffers
// meet them every micro-batch: a 16 MiB paged buffer written again right after handing its pages
// back, against the same write to resident pages; 0 when no difference shows.
double refault_bandwidth_of(int reps) {
  const size_t bytes = size_t{16} << 20;
  Buffer buf(bytes, MemCategory::other, Residency::paged);
  auto write = [&] { std::memset(buf.data(), 1, bytes); };
  const double resident = seconds_of(write, reps);
  const double again = seconds_of(
      [&] {
        buf.discard_range(0, bytes);
        write();
      },
      reps);
  return again > resident ? static_cast<double>(bytes) / (again - resident) : 0.0;
}

// The optimizer step as the trainer runs it over n parameters (optimizer_calibration_params): the
// gradient norm, then AdamW with the clipping and 1/dp folded into its read of the gradient,
// kOptimizerBytesPerParam. The gradients' zeroing at the step's start belongs to the compute probe.
// (Timing a zeroing pass here as well, 36 bytes, measured GPT-2's update at about twice its time.)
// Aligned as the trainer's ParamStore and optimizer state (core/aligned_vector.h), and not Buffers,
// whose bytes a run measuring at start would take for its own memory peak.
class OptimizerState {
 public:
  explicit OptimizerState(int64_t n) : p_(n, 0.5f), g_(n, 0.01f), m_(n), v_(n) {}
  void update() {
    const auto n = static_cast<int64_t>(p_.size());
    const double norm = std::sqrt(ops::sum_of_squares(g_.data(), n));
    ops::adamw_update(p_.data(), g_.data(), m_.data(), v_.data(), n, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, ++step_,
                      norm > 1.0 ? static_cast<float>(1.0 / norm) : 1.f);
  }

 private:
  AlignedFloats p_, g_, m_, v_;
  int64_t step_ = 0;
};

double optimizer_bandwidth_of(int64_t n, int reps) {
  OptimizerState state(n);
  return kOptimizerBytesPerParam * static_cast<double>(n) / seconds_of([&] { state.update(); }, reps);
}

// The slowest rank's seconds of `fn` (started together after a barrier), best of `reps`.
Result<double> group_seconds(Communicator& group, int reps, const std::function<Status()>& fn) {
  double best = 1e30;
  for (int r = 0; r < reps + 1; ++r) {  // the first is a warm-up
    TS_RETURN_IF_ERROR(group.barrier());
    const auto t0 = std::chrono::steady_clock::now();
    TS_RETURN_IF_ERROR(fn());
    float t = std::chrono::duration<float>(std::chrono::steady_clock::now() - t0).count();
    TS_RETURN_IF_ERROR(group.all_reduce(&t, &t, 1, DType::f32, ReduceOp::max));
    if (r > 0) best = std::min(best, static_cast<double>(t));
  }
  return best;
}

// A barrier that sleeps while it waits, so the rank whose turn it is has the cores to itself.
Status sleeping_barrier(Communicator& world) {
  Work w = world.barrier_async();
  for (int ms = 0; ms < 10000 && !w.test(); ++ms) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return w.wait();  // a rank that never comes: the communicator's timeout names it
}

// The optimizer's streams: each of a node's ranks alone in turn (rank % ranks_per_node: mpirun's
// default placement fills a node before the next), then all at once for the node's shared rate.
// Measured all at once only, a rank's rate depended on what the others happened to be doing: GPT-2's
// calibration under mpirun -np 2 on a 2-core Zen 4 read 23-25 GB/s in some runs and 38-41 in others;
// alone it reads 34-41 and together 28 each, as a dp 2 update's streams meet the other rank's.
Status measure_optimizer_streams(Communicator& world, const CalibrationOptions& o, int ranks_per_node, HardwareSpec& h) {
  const int turns = std::clamp(ranks_per_node, 1, world.size());
  const int64_t n = optimizer_calibration_params(o);
  for (int turn = 0; turn < turns; ++turn) {
    TS_RETURN_IF_ERROR(sleeping_barrier(world));
    if (world.rank() % turns == turn) h.optimizer_bandwidth = optimizer_bandwidth_of(n, o.reps);
  }
  if (turns == 1) return Status::ok_status();
  OptimizerState state(n);
  TS_ASSIGN_OR_RETURN(const double together, group_seconds(world, std::max(2, o.reps / 2), [&] {
                        state.update();
                        return Status::ok_status();
                      }));
  h.node_stream_bandwidth = turns * kOptimizerBytesPerParam * static_cast<double>(n) / together;
  return Status::ok_status();
}

}  // namespace

CalibrationProbe probe_for_run(const ModelConfig& model, int64_t micro_batch, int64_t seq_len) {
  CalibrationProbe p;
  p.model = model;
  p.model.n_layer = std::min<decltype(model.n_layer)>(model.n_layer, 2);
  // At most 1024 tokens (a micro-batch of at least one sequence): with GPT-2's vocabulary the head
  // alone is 0.24 TFLOP of forward + backward per 1024 tokens.
  p.micro_batch = std::max<int64_t>(1, std::min<int64_t>(micro_batch, 1024 / std::max<int64_t>(1, seq_len)));
  p.seq_len = seq_len;
  return p;
}

MatmulShape calibration_matmul_shape(int64_t s, int64_t width) {
  if (width > s) return {s, width, 4 * width};
  return {std::min<int64_t>(8 * s, 4096), s, 4 * s};
}

void aim_calibration_at(CalibrationOptions& o, const RunConfig& cfg) {
  o.probe = probe_for_run(cfg.model, cfg.train.micro_batch, cfg.data.seq_len);
  o.probe->precision = cfg.train.precision;
  const int64_t params = ParamLayout(cfg.model).total_numel();
  o.largest_message_bytes = 4 * params;  // the gradient, fp32
  o.optimizer_params = params;
  o.bucket_bytes = static_cast<int64_t>(cfg.parallel.bucket_mb * 1048576.0);
  o.backward_layers = static_cast<int>(std::max<int64_t>(1, cfg.model.n_layer / std::max<int64_t>(1, cfg.parallel.pp)));
  o.matmul_width = cfg.model.d_model;
  o.bf16_peak = !o.quick || cfg.train.precision != Precision::fp32;
}

int64_t optimizer_calibration_params(const CalibrationOptions& o) {
  const int64_t most = int64_t{16} << 20;
  if (o.optimizer_params > 0) return std::clamp<int64_t>(o.optimizer_params, int64_t{1} << 18, most);
  return o.quick ? int64_t{4} << 20 : most;
}

HardwareSpec calibrate_device(const CalibrationOptions& options, int ranks_per_node) {
  CalibrationOptions o = options;
  if (o.quick) o.reps = 2;
  HardwareSpec h;
  h.source = "measured by tessera plan --calibrate";
  // The peak is the best rate seen, square sgemm or any model-like shape, so efficiencies stay <= 1
  // (on a busy machine one timing can be low; best-of over reps keeps the undisturbed ones).
  const std::vector<int64_t> sizes =
      o.quick ? std::vector<int64_t>{16, 32, 64, 128, 256} : std::vector<int64_t>{16, 32, 64, 128, 256, 512, 1024};
  std::vector<double> rates;
  for (int64_t s : sizes) rates.push_back(matmul_rate(s, o.matmul_width, o.reps));
  const double sgemm_gflops = o.sgemm_peak_gflops > 0 ? o.sgemm_peak_gflops : ops::measure_sgemm_peak_gflops(1024, o.reps);
  h.peak_flops_fp32 = std::max(sgemm_gflops * 1e9, *std::max_element(rates.begin(), rates.end()));
  if (o.bf16_peak) h.peak_flops_bf16 = bf16_peak_flops(o.reps);
  h.attention_precision = "fp32";  // the CPU attention kernels compute in f32 at every train.precision
  for (size_t i = 0; i < sizes.size(); ++i)
    h.gemm_efficiency.push_back({sizes[i], std::clamp(rates[i] / h.peak_flops_fp32, 1e-4, 1.0)});
  {  // attention at a small model's shape: B 4, T 256, 4 heads of 32; flops as op_costs.h counts them
    const int64_t B = 4, T = 256, NH = 4, HS = 32, C = NH * HS;
    std::vector<float> qkv(B * T * 3 * C, 0.1f), out(B * T * C), lse(B * NH * T), dout(B * T * C, 0.01f),
        dqkv(B * T * 3 * C);
    const double t = seconds_of(
        [&] {
          ops::attention_forward(out.data(), lse.data(), qkv.data(), B, T, NH, NH, HS);
          ops::attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, NH, NH, HS);
        },
        o.reps);
    const double fwd = 2.0 * B * T * T * C;
    h.attention_efficiency = std::clamp(3.5 * fwd / t / h.peak_flops_fp32, 1e-4, 1.0);
  }
  {  // memory rate: y = a + b over 1 Mi floats (12 MiB moved), the size of a small model's activations
    const int64_t n = 1 << 20;
    std::vector<float> a(n, 1.f), b(n, 2.f), c(n);
    const double t = seconds_of([&] { ops::add(c.data(), a.data(), b.data(), n); }, o.reps * 4);
    h.memory_bandwidth = 3.0 * 4 * n / t;
  }
  {  // per-op overhead: an add of 64 floats
    std::vector<float> a(64, 1.f), b(64, 2.f), c(64);
    h.op_overhead_s = seconds_of([&] { ops::add(c.data(), a.data(), b.data(), 64); }, o.reps);
  }
  h.refault_bandwidth = refault_bandwidth_of(o.reps);
  const CalibrationProbe probe = o.probe ? *o.probe : generic_probe();
  measure_compute_scales(h, probe, o.quick ? 0.3 : 1.0);
  // Scales from a bf16 probe carry its operand rounding: right for bf16 runs, too slow for fp32 ones.
  if (probe.precision != Precision::fp32)
    h.source += " (probe at train.precision " + std::string(precision_name(probe.precision)) + ")";
  const double pages = static_cast<double>(sysconf(_SC_PHYS_PAGES)), page = static_cast<double>(sysconf(_SC_PAGESIZE));
  h.memory_bytes = pages * page / std::max(1, ranks_per_node);
  h.devices_per_node = std::max(1, ranks_per_node);
  h.cores_per_node = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  h.threads_per_device = omp_get_max_threads();
  // Ranks beyond the cores measured all this while taking turns on them, and the model stretches
  // compute by that sharing itself (HardwareSpec::core_sharing): the device is what one rank gets
  // alone. (4 ranks on 2 cores, bench-small: predicted 35 % over the measured step before.)
  const double sharing = h.core_sharing(h.devices_per_node, omp_get_max_threads());
  h.peak_flops_fp32 *= sharing;
  h.memory_bandwidth *= sharing;
  h.refault_bandwidth *= sharing;
  h.op_overhead_s /= sharing;
  return h;
}

std::vector<int64_t> all_reduce_calibration_counts(const CalibrationOptions& o) {
  // Up to the size of a small model's whole gradient (64 MiB; the quick measurement 16 MiB, or the
  // run's gradient up to 64 MiB): past the caches a ring moves data at a fraction of the in-cache
  // rate (two ranks of the 2-core VM: 6.3-6.7 GB/s fitted to 16 MiB, 2.8-3.0 to 64 MiB), and the
  // model charges the whole gradient exchange at the fitted rate.
  const int64_t most = kLargestExchangeBytes / 4;  // floats
  std::vector<int64_t> counts;
  if (!o.quick) {
    for (int64_t n = 1; n <= most; n *= 4) counts.push_back(n);
    return counts;
  }
  counts = {1, 4096, 262144, int64_t{4} << 20};  // 4 B, 16 KiB, 1 MiB, 16 MiB
  const int64_t gradient = std::min(o.largest_message_bytes / 4, most);
  if (gradient > counts.back()) counts.push_back(gradient);
  return counts;
}

Result<std::vector<MeasuredCollective>> calibrate_collectives(Communicator& world, const CalibrationOptions& o) {
  std::vector<MeasuredCollective> out;
  const int P = world.size();
  for (int g = 2; g <= P; ++g) {
    if (P % g != 0) continue;
    TS_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> group,
                        world.split(world.rank() / g, world.rank(), "calibrate/" + std::to_string(g)));
    // Least squares of t = a + b n over sizes, then alpha = a / 2(g-1), bandwidth = 2(g-1)/g / b.
    std::vector<double> xs, ts;
    const std::vector<int64_t> counts = all_reduce_calibration_counts(o);
    std::vector<float> buf(static_cast<size_t>(counts.back()), 1.f);
    for (int64_t n : counts) {
      TS_ASSIGN_OR_RETURN(double best, group_seconds(*group, o.quick ? 2 : o.reps, [&] {
                            return group->all_reduce(buf.data(), buf.data(), n, DType::f32);
                          }));
      xs.push_back(4.0 * static_cast<double>(n));
      ts.push_back(best);
    }
    const double k = static_cast<double>(xs.size());
    double sx = 0, st = 0, sxx = 0, sxt = 0;
    for (size_t i = 0; i < xs.size(); ++i) sx += xs[i], st += ts[i], sxx += xs[i] * xs[i], sxt += xs[i] * ts[i];
    // The slope from the least-squares line (the large messages dominate it), the latency from the
    // smallest message (a fitted intercept can come out negative).
    const double b = (k * sxt - sx * st) / (k * sxx - sx * sx);
    const double a = ts.front();
    MeasuredCollective m;
    m.ranks = g;
    m.link.latency_s = a / (2.0 * (g - 1));
    m.link.bandwidth = b > 0 ? 2.0 * (g - 1) / g / b : 1e12;
    out.push_back(m);
  }
  return out;
}

double overlap_from_timings(double comm_alone, double compute_alone, double both) {
  if (comm_alone <= 0) return 1.0;
  const double exposed = std::max(0.0, both - compute_alone);
  return std::clamp(1.0 - exposed / comm_alone, 0.0, 1.0);
}

Result<double> calibrate_overlap(Communicator& world, const CalibrationOptions& o) {
  if (world.size() < 2) return kAssumedCpuOverlap;
  const int reps = o.quick ? 2 : o.reps;
  // The gradient as the trainer exchanges it: buckets of bucket_bytes, each started once the backward
  // has written all of it, MPI poked (test()) between layers only. With a few layers MPI moves little
  // before the final wait, whatever it manages for one small message in a tight loop.
  const int64_t gradient_bytes = o.largest_message_bytes > 0 ? o.largest_message_bytes : int64_t{16} << 20;
  const int64_t n = std::max<int64_t>(1, std::min(gradient_bytes, kLargestExchangeBytes) / 4);
  const int64_t bucket = std::clamp<int64_t>(o.bucket_bytes / 4, 1, n);
  const int layers = std::max(1, o.backward_layers);
  std::vector<float> grad(static_cast<size_t>(n), 1.f);
  auto slice_end = [&](int l) { return n * (l + 1) / layers; };
  TS_ASSIGN_OR_RETURN(double comm, group_seconds(world, reps, [&] {
                        for (int64_t b = 0; b < n; b += bucket)
                          TS_RETURN_IF_ERROR(world.all_reduce(grad.data() + b, grad.data() + b, std::min(bucket, n - b), DType::f32));
                        return Status::ok_status();
                      }));
  // A layer's backward: matmuls (every rank runs as many as the slowest needs for the backward to
  // outlast the exchange twice over), then its slice of the gradient written.
  const int64_t N = 256, C = 256, OC = 1024;
  std::vector<float> x(N * C, 0.5f), w(OC * C, 0.25f), y(N * OC);
  auto matmul = [&] { ops::matmul_forward(y.data(), x.data(), w.data(), nullptr, N, C, OC); };
  const double one = seconds_of(matmul, 2);
  float per_layer = static_cast<float>(std::clamp(std::ceil(2.0 * comm / layers / one), 1.0, 4096.0));
  TS_RETURN_IF_ERROR(world.all_reduce(&per_layer, &per_layer, 1, DType::f32, ReduceOp::max));
  auto layer = [&](int l) {
    for (int i = 0; i < static_cast<int>(per_layer); ++i) matmul();
    const int64_t begin = l == 0 ? 0 : slice_end(l - 1);
    ops::fill(grad.data() + begin, slice_end(l) - begin, 1.f);
  };
  TS_ASSIGN_OR_RETURN(double compute, group_seconds(world, reps, [&] {
                        for (int l = 0; l < layers; ++l) layer(l);
                        return Status::ok_status();
                      }));
  TS_ASSIGN_OR_RETURN(double both, group_seconds(world, reps, [&] {
                        std::vector<Work> flight;
                        int64_t launched = 0;
                        for (int l = 0; l < layers; ++l) {
                          layer(l);
                          for (Work& w : flight) (void)w.test();
                          for (; launched + bucket <= slice_end(l); launched += bucket)
                            flight.push_back(world.all_reduce_async(grad.data() + launched, grad.data() + launched, bucket, DType::f32));
                        }
                        if (launched < n)
                          flight.push_back(world.all_reduce_async(grad.data() + launched, grad.data() + launched, n - launched, DType::f32));
                        for (Work& w : flight) TS_RETURN_IF_ERROR(w.wait());
                        return Status::ok_status();
                      }));
  return overlap_from_timings(comm, compute, both);
}

Result<HardwareSpec> calibrate_machine(Communicator& world, const CalibrationOptions& o, int ranks_per_node) {
  HardwareSpec h = calibrate_device(o, ranks_per_node);
  TS_RETURN_IF_ERROR(measure_optimizer_streams(world, o, ranks_per_node, h));
  TS_ASSIGN_OR_RETURN(h.overlap_efficiency, calibrate_overlap(world, o));
  h.step_overhead_s = 5e-5;  // the trainer's bookkeeping per step: metrics, progress, loss read back
  TS_ASSIGN_OR_RETURN(h.measured, calibrate_collectives(world, o));
  // One rank: shared-memory copies at half the copy rate. A single node's "network" is its own link.
  h.intra = h.measured.empty() ? LinkSpec{1e-6, h.memory_bandwidth / 2} : h.measured.front().link;
  h.inter = h.intra;
  return h;
}

}  // namespace tessera
