// The parallel layout a run config asks for ([parallel] dp, pp, tp, schedule, virtual_stages,
// stage_layers, sequence_parallel), checked against the world size and the model before any rank
// builds a communicator group or a model chunk. Every error names the problem and the key to change.
// Pure planning: no communicator, no allocation beyond the split. The keys: docs/parallel-config.md.
#pragma once
#include <string>
#include <utility>

#include "comm/grid.h"
#include "model/context_parallel_hooks.h"
#include "model/param_layout.h"
#include "core/status.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/stage_balance.h"
#include "config/run_config.h"

namespace tessera {

struct ParallelLayout {
  GridShape grid;  // dp, pp, tp; dp * pp * tp == the world size
  // At pp = 1 parallel.schedule is ignored and this is one_f_one_b (with one stage: plain gradient
  // accumulation, one micro-batch's activations at a time).
  PipelineScheduleKind schedule = PipelineScheduleKind::one_f_one_b;
  PipelineShape pipe;  // stages = pp, micro_batches = train.grad_accum, virtual_stages; valid for `schedule`
  StageSplit split;    // over pp * virtual_stages virtual stages (parallel.stage_layers, or balanced)
  bool sequence_parallel = false;
  ContextParallelMode cp_mode = ContextParallelMode::ulysses;  // parallel.cp_mode (with grid.cp > 1)

  // Layers [first, last) of model chunk `chunk` (0..V-1) on pipeline rank `stage` (0..pp-1): virtual
  // stage chunk * pp + stage. TS_CHECKs the range.
  std::pair<int, int> chunk_layers(int stage, int chunk) const;
  // Whether the final norm and head sit on a virtual stage of their own (the split's last stage empty).
  HeadStage head_stage() const;
  // One line for the banner, e.g. "dp=2 tp=2 pp=2 (1f1b, 4 micro-batches; stages [0,1) [1,2))";
  // interleaved: "... pp=2 (interleaved x2, 4 micro-batches; virtual stages [0,2) [2,4) [4,6) [6,8))";
  // " sequence-parallel" after tp when set; ", the last holding the head alone" after an empty last stage.
  std::string describe() const;
};

// Checks, in order: the grid against world_size; tp against the model's heads, KV heads and d_ff (the
// vocabulary is padded, never an error); sequence_parallel (tp >= 2, micro_batch * seq_len divisible by
// tp); then, at pp >= 2, the schedule against virtual_stages and train.grad_accum; then the layer split
// (n_layer >= pp * virtual_stages, stage_layers' length and sum). Errors are invalid_argument.
Result<ParallelLayout> plan_parallel_layout(const RunConfig& cfg, int world_size);

// The experts a rank at ep coordinate `ep_rank` stores: only its own (E / ep of each MoE layer) under
// expert parallelism (ZeRO then shards them over dp); every expert at ep = 1.
ExpertShard stored_experts(const RunConfig& cfg, const ParallelLayout& lay, int ep_rank);

// The parameter layout of chunk `chunk` of pipeline stage `stage` on tp rank `tp_rank` and ep rank
// `ep_rank`: its layers, whether it holds the embedding or the head, its tp and expert shard, and
// ZeRO's layer alignment. The trainer's stores (and a parameter server's copy of that position, at
// ep = 1) and the memory planner's replay are built from it.
ParamLayout chunk_layout(const RunConfig& cfg, const ParallelLayout& lay, int stage, int chunk, int tp_rank, int ep_rank);

}  // namespace tessera
