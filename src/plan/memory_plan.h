// Memory planning: every rank's peak memory for a run config, predicted without building the model,
// in the categories the allocator counts (core/memory.h), and the check of train.memory_budget_mb.
//
// The prediction replays what set-up and one training step allocate, in order, against the same
// counters the allocator keeps (live and peak per category, total live and peak):
//   set-up   the parameter/gradient stores per model chunk (plus, with model.init_weights on a stage
//            or tp shard, the whole model imported once and freed), the optimizer (AdamW m and v over
//            the owned range; DataParallel: the tied embedding's side buffer at dp > 1; ZeRO: per-layer
//            unit slices, gradient accumulators, send/receive slots), then the
//            activations of each Transformer instance (one for dp-only, one per activation slot and
//            chunk under a pipeline schedule; under sequence parallelism each is first allocated
//            whole, then freed and reallocated with N/tp rows when the hooks are set);
//   step     the sequence-parallel reduce-scatter buffer (first forward), and under ZeRO 2/3 the
//            resident pages of the paged gradient/parameter buffers at each point zero.cpp samples
//            them (mincore), simulated page by page over the schedule's forwards and backwards.
// Data loaders, the pipeline's token buffers and DataParallel's buckets (in place) are not counted
// by the allocator and not here either.
//
// Assumptions where the real numbers depend on timing or data (meant as upper bounds): a ZeRO
// reduction launched at one layer is seen complete at the second layer's poll after it (so two
// layers' full gradients are in flight besides the one being written), a prefetched ZeRO-3 gather
// has landed by the next sample, and every embedding row's gradient page is touched.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "comm/grid.h"
#include "core/memory.h"
#include "core/status.h"
#include "model/param_layout.h"
#include "plan/parallel_layout.h"
#include "config/run_config.h"

namespace tessera {

// Bytes per MemCategory (indexed by static_cast<int>(MemCategory)).
using MemBytes = std::array<int64_t, kNumMemCategories>;

struct RankMemoryPlan {
  int rank = 0;      // world rank
  GridCoord coord;   // dp, pp, tp
  std::vector<std::pair<int, int>> chunk_layers;  // layers [first, last) of each model chunk
  std::vector<int> activation_slots;              // Transformer instances per chunk
  int64_t parameters = 0;  // elements of this rank's parameter buffers (all chunks, alignment padding included)
  MemBytes at_peak{};        // what each category holds at the moment of the peak: sums to `peak`
  MemBytes category_peak{};  // each category's own maximum (the allocator's per-category peak counters)
  int64_t peak = 0;          // predicted peak of the total (the allocator's total_peak)
  // The largest train.micro_batch (keeping train.batch_tokens, so grad_accum follows, and everything
  // else) whose predicted peak on this rank fits train.memory_budget_mb: a divisor of
  // batch_tokens / (seq_len x dp) that gives a valid layout. Without a budget every valid value fits
  // (the largest is grad_accum 1). 0: none fits.
  int64_t largest_micro_batch_that_fits = 0;

  int64_t at_peak_bytes(MemCategory c) const { return at_peak[static_cast<size_t>(c)]; }
  // Ranks print once per kind: the same stage (hence chunks) and tp rank.
  bool same_kind(const RankMemoryPlan& o) const { return coord.pp == o.coord.pp && coord.tp == o.coord.tp; }
};

struct MemoryPlan {
  ParallelLayout layout;
  int world_size = 1;
  int64_t micro_batch = 0;
  int64_t budget_bytes = 0;  // train.memory_budget_mb in bytes (MiB = 2^20 bytes); 0 = no limit
  std::vector<RankMemoryPlan> ranks;  // by world rank

  const RankMemoryPlan& worst() const;  // the rank with the highest peak (lowest rank on ties)
  int64_t peak() const { return worst().peak; }
  bool fits() const { return budget_bytes <= 0 || peak() <= budget_bytes; }
  // Over all ranks (the smallest of theirs).
  int64_t largest_micro_batch_that_fits() const;
};

// Plans every rank of `world_size` (the layout checks of plan_parallel_layout apply, with their errors).
Result<MemoryPlan> plan_memory(const RunConfig& cfg, int world_size);

// The same without the largest-micro-batch search (largest_micro_batch_that_fits stays 0): one
// simulation per stage and tp rank, for callers that plan many layouts (plan/layout_search.h).
Result<MemoryPlan> plan_memory_peaks(const RunConfig& cfg, int world_size);

// A single config change and the peak it gives (its worst rank).
struct MemoryOption {
  std::string change;  // e.g. "parallel.zero=2", "parallel.tp=2 parallel.dp=1", "train.micro_batch=2"
  int64_t peak = 0;
};
// The single changes, among a higher parallel.zero, train.recompute selective/full, sequence
// parallelism, more tp or pp for the same world size (dp shrinks, train.batch_tokens kept) and a
// smaller train.micro_batch (batch_tokens kept), whose plan fits `budget_bytes`; per kind the
// smallest change that fits (lowest ZeRO stage, lightest recompute, largest micro-batch), every
// tp/pp layout that fits.
std::vector<MemoryOption> memory_options_that_fit(const RunConfig& cfg, int world_size, int64_t budget_bytes);

// ok when train.memory_budget_mb is 0 or every rank's predicted peak fits it; else invalid_argument
// naming the worst rank, its predicted MiB against the budget and the single changes that would fit.
// Errors of the layout itself (plan_parallel_layout) come back unchanged.
Status check_memory_budget(const RunConfig& cfg, int world_size);

// The activation bytes one Transformer allocates (model/transformer.cpp, allocate_activations) for a
// micro-batch (B, T) over `layout` (its layer range and tp shard), with or without sequence parallelism;
// under context parallelism T is the rank's seq_len / cp positions (`ring`: ring attention's buffers);
// under expert parallelism (ep) the experts' rows and receive buffers are ep x the slots;
// split_backward: a zb-h1 model's kept linear output gradients.
int64_t transformer_activation_bytes(const ModelConfig& cfg, const ParamLayout& layout, int64_t B, int64_t T,
                                     bool sequence_parallel, Recompute recompute = Recompute::none, int cp = 1,
                                     bool ring = false, int ep = 1, bool split_backward = false);

std::string format_mib(int64_t bytes);  // "12.3"

}  // namespace tessera
