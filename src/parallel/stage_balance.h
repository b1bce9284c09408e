// Splitting a model's layers into pipeline stages: a cost model of each layer's compute and memory
// (embedding and head included), the split that minimises the slowest stage, and the check of a
// split given by hand (parallel.stage_layers).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"

namespace tessera {

// Cost of one piece of the model for one token of a micro-batch of sequence length T.
struct LayerCost {
  double flops = 0;        // forward + backward
  double param_bytes = 0;  // parameters, gradients and AdamW moments (16 bytes per parameter)
  double act_bytes = 0;    // activations kept for backward, per token
};

// Costs of the embedding, each transformer layer and the final norm + head (in that order: L + 2).
std::vector<LayerCost> model_piece_costs(const ModelConfig& cfg, int64_t T);

// A split of layers [0, L) into S consecutive stages: bounds[s] .. bounds[s+1] is stage s's range
// (bounds.size() == S + 1, bounds[0] == 0, bounds[S] == L). Stage 0 also holds the embedding and
// stage S-1 the head.
struct StageSplit {
  std::vector<int> bounds;
  std::vector<double> flops;   // per stage, per token
  std::vector<double> bytes;   // per stage: parameter state + activations of one micro-batch token
  std::string describe() const;  // "[0,3) [3,6) ..." with the relative cost of each stage
  // Under the interleaved schedule rank r runs stages r, r + ranks, r + 2 ranks, ...: its total.
  std::vector<double> rank_flops(int ranks) const;
};

// Fewest layers stage `stage` of `stages` may hold: one, except the last, which may hold the final
// norm and head alone (a head worth several layers, GPT-2's ~5, then gets a stage of its own).
inline int min_stage_layers(int stage, int stages) { return stage == stages - 1 ? 0 : 1; }

// The split of L layers into `stages` stages (min_stage_layers each) minimising the largest stage compute (ties:
// the smaller largest memory). Error when stages > L.
// With ranks < stages (the interleaved schedule: stages = ranks x virtual stages, stage s on rank
// s % ranks) it minimises what a rank does per micro-batch instead, its stages' total: the sorted
// rank totals, largest first, then the sorted stage costs (a chunk that is slow alone still holds up
// the next rank). A local search from the per-stage split, moving one boundary a layer at a time
// (checked against every split by brute force in tests/parallel/stage_balance_test.cpp).
// Given the step's micro-batches as well (a valid interleaved shape), it minimises the step itself:
// the interleaved schedule simulated with each chunk's forward a third of its compute and its
// backward two thirds (pipeline_schedule_sim.h), ties broken by the rank totals. Equal rank totals
// still leave a bubble when the chunks are unequal (GPT-2's head is ~5 layers), and an unequal
// split can idle less. Every split is simulated when there are at most kExhaustiveInterleavedSplits,
// else a local search from the rank-total split.
inline constexpr int64_t kExhaustiveInterleavedSplits = 4096;
Result<StageSplit> balance_stages(const ModelConfig& cfg, int64_t T, int stages, int ranks = 0, int micro_batches = 0);
// The interleaved schedule's simulated step for a split (chunk forward = a third of its compute,
// backward two thirds), in the same units as StageSplit::flops times micro-batches.
double interleaved_makespan(const StageSplit& split, int ranks, int micro_batches);
// A split given as layer counts per stage (parallel.stage_layers): each >= min_stage_layers, summing to L.
Result<StageSplit> split_from_layer_counts(const ModelConfig& cfg, int64_t T, const std::vector<int64_t>& counts);

}  // namespace tessera
