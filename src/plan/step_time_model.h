// The step-time model: from the layout the memory planner uses (plan_parallel_layout) and a hardware
// description (plan/hardware.h), one training step's predicted seconds, tokens/s and where the time
// goes. What it adds up, per rank (the step is its slowest rank):
//   compute    every micro-batch's forward and backward (recomputation included) through this rank's
//              chunks, op by op (plan/op_costs.h): FLOPs at the achieved GEMM / attention rate,
//              bytes at the memory bandwidth, plus a fixed per-op overhead;
//   tp         tensor-parallel collectives (2 all-reduces per layer forward and 2 backward, or their
//              reduce-scatter / all-gather pairs under sequence parallelism; again in a full
//              recomputation): on the critical path, never hidden;
//   pp         with pp >= 2, the schedule itself runs in the schedule simulator
//              (parallel/pipeline_schedule_sim.h) with each rank's chunk costs (compute + tp) and
//              each activation / gradient message's point-to-point time: the bubble is the idle
//              time at zero message time, the exposed pp time what the messages add;
//   dp         the gradient reduction over the dp group: DataParallel's buckets and ZeRO 1-2's
//              reduce-scatters overlap the last micro-batch's backward (overlap_efficiency of
//              what fits in it hides; the last bucket never does), ZeRO 1-2's parameter
//              all-gather after the update does not; ZeRO 2 reduce-scatters every micro-batch, ZeRO 3 also all-gathers the
//              parameters before every forward and backward (prefetched: overlapping them);
//              and the tied embedding's sum over the first and last stage;
//   optimizer  AdamW, clipping and zeroing over the owned parameters, memory bound;
//   other      the per-step overhead (data loading, host synchronisation) and the loss average.
// On a CPU machine (hardware cores_per_node) ranks x threads beyond the node's cores stretch compute
// and the optimizer by the excess (oversubscribed ranks take turns; waiting ranks give their core away).
// Not modelled: contention between communication and compute for memory bandwidth, stragglers,
// compression, local SGD and the parameter server (their layouts are predicted as plain dp).
#pragma once
#include <string>

#include "config/run_config.h"
#include "core/status.h"
#include "plan/hardware.h"
#include "plan/parallel_layout.h"

namespace tessera {

struct StepTimeBreakdown {
  double compute_s = 0;    // forward + backward (incl. recompute) of the slowest rank's micro-batches
  double recompute_s = 0;  // the part of compute_s that train.recompute re-runs
  double bubble_s = 0;     // pipeline idle time (0 at pp = 1)
  double tp_s = 0;         // tensor-parallel communication (exposed: all of it)
  double cp_s = 0;         // context-parallel all-to-alls around attention (exposed: all of it)
  double ep_s = 0;         // expert-parallel all-to-alls around the experts (exposed: all of it)
  double pp_s = 0;         // pipeline messages' exposed time
  double dp_s = 0;         // data-parallel / ZeRO communication left exposed after overlap
  double dp_total_s = 0;   // the same before overlap (what the dp group moves, in seconds)
  double optimizer_s = 0;
  double other_s = 0;
  double sum() const { return compute_s + bubble_s + tp_s + cp_s + ep_s + pp_s + dp_s + optimizer_s + other_s; }
};

struct StepTimePrediction {
  ParallelLayout layout;
  int world_size = 1;
  int64_t tokens_per_step = 0;  // train.batch_tokens over all replicas
  double step_s = 0;
  double tokens_per_s = 0;
  double flops_per_device = 0;  // model FLOP/s per rank (6N + attention per token, no recompute)
  double mfu = 0;               // flops_per_device over the device's peak for train.precision
  StepTimeBreakdown breakdown;
  // "step 1.234 s (compute 0.9, bubble 0.1, tp 0.05, pp 0.01, dp 0.02, optimizer 0.01, other 0.0)".
  std::string describe() const;
};

Result<StepTimePrediction> predict_step_time(const RunConfig& cfg, int world_size, const HardwareSpec& hw);

}  // namespace tessera
