// `tessera plan --calibrate`: measures this machine into a HardwareSpec (plan/hardware.h) with the
// kernels the trainer runs (backend/ops.h, one rank's OpenMP threads): the matmul rate by size
// against the best square sgemm, attention's rate, the memory rate of an elementwise op at working-set
// sizes of small models, the fixed cost of an op, and, over MPI, ring all-reduce alpha-beta for
// groups of every size that divides the world, and how much of an all-reduce hides behind compute.
// What it cannot measure (the inter-node network) comes from the caller's defaults.
#pragma once
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "config/run_config.h"
#include "core/status.h"
#include "model/config.h"
#include "plan/hardware.h"

namespace tessera {

// The model whose forward + backward against the op model's sum for it sets compute_scale (what the
// per-op rates miss in a real step). A run measuring at start probes its own model (2 of its layers,
// embedding and head included, at its micro-batch): the generic probe's small matmuls transfer
// poorly to larger models (on the 2-core VM its scale moved 0.71-1.36 between calibrations, and
// bench-small's compute came out 25-50 % low with it).
struct CalibrationProbe {
  ModelConfig model;
  int64_t micro_batch = 4, seq_len = 64;
  // The run's train.precision: the probe's linear layers run at it, so the scales describe such steps
  // (a bf16 step also rounds every matmul's operands, a memory-bound pass the op model leaves out).
  Precision precision = Precision::fp32;
};
// A run's probe: its model cut to at most 2 layers, at its micro-batch (cut to at most 1024 tokens,
// at least one sequence) and sequence length.
CalibrationProbe probe_for_run(const ModelConfig& model, int64_t micro_batch, int64_t seq_len);

struct CalibrationOptions {
  int reps = 10;  // timings per point (the best is kept: a loaded machine only ever slows a run)
  // The trainer's measurement at start: matmuls up to 256 wide, 4 message sizes, 2 reps (0.3 s on
  // one rank of a 2-core VM, ~1 s for 4 ranks sharing its cores).
  bool quick = false;
  // The square sgemm peak already measured with the same threads (GFLOP/s); 0 = time it here.
  double sgemm_peak_gflops = 0;
  // The compute_scale probe; none: the generic one (tiny's family, 2 layers x 128, micro-batch 4 x 64).
  std::optional<CalibrationProbe> probe;
  // The quick measurement also times an all-reduce of this many bytes (the run's gradient; at most
  // 64 MiB) when it exceeds 16 MiB: past the caches the rate keeps falling, and the model charges
  // the whole gradient exchange at the fitted rate.
  int64_t largest_message_bytes = 0;
  // The parameters a rank's optimizer steps over (the run's); 0 = 16 Mi (quick: 4 Mi). The rate
  // depends on the size: bench-small's 14 Mi streamed at 0.55-0.7 of the rate over 4 Mi on the 2-core VM.
  int64_t optimizer_params = 0;
  // The overlap measurement exchanges a gradient of largest_message_bytes (none: 16 MiB; at most
  // 64 MiB) in buckets of bucket_bytes (parallel.bucket_mb) over a backward of backward_layers
  // layers (the run's layers per rank), as DataParallel does.
  int64_t bucket_bytes = int64_t{4} << 20;
  int backward_layers = 8;
  // The run's model width (d_model); 0 = none. A matmul narrower than it is timed as a layer runs one:
  // that many rows through weights of width x 4 width (calibration_matmul_shape).
  int64_t matmul_width = 0;
  // Also time the bf16 matmul (peak_flops_bf16). The full calibration always does; the trainer's
  // quick one only for a run at train.precision bf16 / fp16 (aim_calibration_at).
  bool bf16_peak = true;
};

// The matmul timed for gemm_efficiency at smallest dimension s. Below the model's width, a layer's:
// s rows (a small micro-batch's tokens) through weights of width x 4 width, streamed from beyond the
// first caches. Otherwise a generic one: rows 8 s (at most 4096), in s, out 4 s. The generic shape
// at s = 32 (256 x 32 x 128, every operand in L1) read 0.94-1.0 of the peak on the 2-core VM while
// bench-small's 32-row matmuls through 384 x 1536 weights ran far below it, and the layout search
// took micro-batch 1 for it (predicted 2,976 tokens/s, measured 1,150).
struct MatmulShape {
  int64_t rows, in, out;
};
MatmulShape calibration_matmul_shape(int64_t s, int64_t width);

// Aims the measurement at a run: its probe (probe_for_run), its gradient as the largest all-reduce
// and the overlap's exchange, its parameters for the optimizer, its buckets and layers per pipeline
// rank. What a run measuring at start uses, and `tessera plan --calibrate --config RUN.toml`.
void aim_calibration_at(CalibrationOptions& options, const RunConfig& cfg);

// The parameters the optimizer rate is timed over: optimizer_params within [256 Ki, 16 Mi] (16 Mi
// = 256 MiB of parameters, gradients and moments, beyond the caches like a model's), else the default.
int64_t optimizer_calibration_params(const CalibrationOptions& options);

// A probe's forward + backward by op class: measured (step_s: the whole call; the classes: its
// profiled ops) or predicted by the op model (step_s unused).
struct ProbeClassTimes {
  double step_s = 0, matmul_s = 0, attention_s = 0, memory_s = 0;
};
// compute_scale = measured step / predicted, and each class's scale = its measured share of the step
// (the time between profiled ops spread over the classes pro rata) / its predicted time; 0 where the
// probe has no such op. Each within [0.25, 8].
void set_compute_scales(HardwareSpec& h, const ProbeClassTimes& measured, const ProbeClassTimes& predicted);

// The device part of this rank: peak_flops_fp32 (best square sgemm), gemm_efficiency, attention_
// efficiency, memory_bandwidth, op_overhead_s, memory_bytes (this machine's memory / ranks_per_node),
// compute_scale and the per-class scales from a probe model's forward + backward (the run's, or the
// generic 2 layers x 128 at micro-batch 4 x 64; set_compute_scales).
// The probe allocates and frees a model: call this before the caller's own large allocations (it
// resets the process's memory peaks to the live bytes when the probe is gone).
HardwareSpec calibrate_device(const CalibrationOptions& options, int ranks_per_node);

// Collective over `world`: for each group size g in 2..size dividing size, groups of g consecutive
// ranks time all-reduces from 4 B to 64 MiB (quick: 16 MiB, or the run's gradient up to 64 MiB:
// largest_message_bytes), and a least-squares fit of the ring model
// 2(g-1) alpha + 2(g-1)/g n / bandwidth gives one row. Empty at world size 1.
Result<std::vector<MeasuredCollective>> calibrate_collectives(Communicator& world, const CalibrationOptions& options);
// The element counts (f32) those all-reduces time, smallest first.
std::vector<int64_t> all_reduce_calibration_counts(const CalibrationOptions& options);

// How much of a data-parallel gradient exchange hides behind the backward here, run as the trainer runs
// it (bucket_bytes buckets started as backward_layers layers write the gradient, test() between
// layers, the rest waited for at the end): 1 - exposed / alone, exposed being what the pair takes
// beyond the compute alone (overlap_from_timings). MPI without a progress thread moves a message
// only inside MPI calls, so on a CPU this is well below 1. One rank has nothing to measure:
// kAssumedCpuOverlap.
constexpr double kAssumedCpuOverlap = 0.5;
Result<double> calibrate_overlap(Communicator& world, const CalibrationOptions& options);
double overlap_from_timings(double comm_alone, double compute_alone, double both);

// This machine as one rank of `world` sees it: calibrate_device, the optimizer's streaming rate (the
// node's ranks one at a time, each alone), calibrate_overlap and calibrate_collectives, the first
// collective row as the intra-node link and as the network (what `tessera plan --calibrate` writes
// and a run without train.hardware measures at start). No name.
Result<HardwareSpec> calibrate_machine(Communicator& world, const CalibrationOptions& options, int ranks_per_node);

}  // namespace tessera
