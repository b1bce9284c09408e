// Pipeline stage balancing: a linear-partition dynamic programme over per-layer costs, and for the
// interleaved schedule a search over each rank's total or over the simulated step.
#include "parallel/stage_balance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>

#include "core/log.h"
#include "parallel/pipeline_schedule_sim.h"

namespace tessera {

std::vector<LayerCost> model_piece_costs(const ModelConfig& c, int64_t T) {
  const double C = c.d_model, F = c.d_ff, V = c.vocab_size, Q = c.qkv_width();
  const double FC = c.arch == Arch::llama ? 2 * F : F;
  const double layer_params = Q * C + C * C + FC * C + C * F + 4 * C;
  const double attn_flops = 2.0 * 2.0 * T * C * 0.5 * 3.0;  // QK^T and AV, causal, forward + backward
  // Saved per token (floats): ln1, qkv, atty, residual2, ln2, fch, fch_act, residual3 (+ small stats).
  const double layer_acts = 4.0 * (C + Q + C + C + C + FC + F + C);
  std::vector<LayerCost> costs;
  const double embed_params = V * C + (c.arch == Arch::gpt2 ? c.max_seq_len * C : 0);
  costs.push_back({2.0 * C, 16.0 * embed_params, 4.0 * C});  // lookup and scatter-add only
  for (int64_t l = 0; l < c.n_layer; ++l) costs.push_back({6.0 * layer_params + attn_flops, 16.0 * layer_params, layer_acts});
  // The head's matmul (forward + backward) and its logits; a tied head adds no parameters of its own.
  const double head_params = (c.tied_embeddings ? 0 : V * C) + 2 * C;
  costs.push_back({6.0 * V * C, 16.0 * head_params, 4.0 * (2 * C + V)});
  return costs;
}

namespace {

StageSplit measure(const std::vector<LayerCost>& costs, std::vector<int> bounds) {
  StageSplit s;
  const int S = static_cast<int>(bounds.size()) - 1, L = bounds.back();
  for (int st = 0; st < S; ++st) {
    double f = 0, b = 0;
    for (int l = bounds[st]; l < bounds[st + 1]; ++l) f += costs[l + 1].flops, b += costs[l + 1].param_bytes + costs[l + 1].act_bytes;
    if (st == 0) f += costs[0].flops, b += costs[0].param_bytes + costs[0].act_bytes;
    if (st == S - 1) f += costs[L + 1].flops, b += costs[L + 1].param_bytes + costs[L + 1].act_bytes;
    s.flops.push_back(f);
    s.bytes.push_back(b);
  }
  s.bounds = std::move(bounds);
  return s;
}

}  // namespace

std::vector<double> StageSplit::rank_flops(int ranks) const {
  std::vector<double> total(static_cast<size_t>(ranks), 0.0);
  for (size_t s = 0; s < flops.size(); ++s) total[s % static_cast<size_t>(ranks)] += flops[s];
  return total;
}

namespace {

// What the interleaved balance minimises, compared lexicographically (see balance_stages).
struct InterleavedScore {
  std::vector<double> ranks, stages;
  double bytes = 0;
};

InterleavedScore interleaved_score(const StageSplit& s, int ranks) {
  InterleavedScore out{s.rank_flops(ranks), s.flops, 0};
  std::sort(out.ranks.rbegin(), out.ranks.rend());
  std::sort(out.stages.rbegin(), out.stages.rend());
  std::vector<double> bytes(static_cast<size_t>(ranks), 0.0);
  for (size_t i = 0; i < s.bytes.size(); ++i) bytes[i % static_cast<size_t>(ranks)] += s.bytes[i];
  out.bytes = *std::max_element(bytes.begin(), bytes.end());
  return out;
}

// -1 / 0 / 1 as a is better than / as good as / worse than b. Costs are sums of the same few
// per-layer terms, so a relative tolerance keeps orderings of the same sum equal.
int compare_costs(const std::vector<double>& a, const std::vector<double>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    const double tol = 1e-9 * std::max(std::abs(a[i]), std::abs(b[i]));
    if (a[i] < b[i] - tol) return -1;
    if (a[i] > b[i] + tol) return 1;
  }
  return 0;
}

bool better(const InterleavedScore& a, const InterleavedScore& b) {
  if (int c = compare_costs(a.ranks, b.ranks)) return c < 0;
  if (int c = compare_costs(a.stages, b.stages)) return c < 0;
  return a.bytes < b.bytes * (1 - 1e-9);
}

// Every stage holds at least one layer, except the last, which may hold the final norm and head alone.
bool valid_bounds(const std::vector<int>& bounds) {
  const size_t S = bounds.size() - 1;
  for (size_t s = 0; s < S; ++s)
    if (bounds[s + 1] - bounds[s] < min_stage_layers(static_cast<int>(s), static_cast<int>(S))) return false;
  return true;
}

StageSplit balance_rank_totals(const std::vector<LayerCost>& costs, StageSplit start, int ranks) {
  StageSplit best = std::move(start);
  InterleavedScore best_score = interleaved_score(best, ranks);
  const size_t S = best.bounds.size() - 1;
  for (bool improved = true; improved;) {
    improved = false;
    for (size_t b = 1; b < S; ++b)
      for (int step : {-1, 1}) {
        std::vector<int> bounds = best.bounds;
        bounds[b] += step;
        if (!valid_bounds(bounds)) continue;
        StageSplit cand = measure(costs, std::move(bounds));
        InterleavedScore score = interleaved_score(cand, ranks);
        if (!better(score, best_score)) continue;
        best = std::move(cand);
        best_score = std::move(score);
        improved = true;
      }
  }
  return best;
}

// The interleaved schedule of one shape, simulated for any split of its virtual stages.
class InterleavedStep {
 public:
  InterleavedStep(int ranks, int micro_batches, int virtual_stages)
      : ranks_(ranks),
        schedules_(make_all_pipeline_schedules(PipelineScheduleKind::interleaved,
                                               PipelineShape{ranks, micro_batches, virtual_stages})) {}

  double makespan(const StageSplit& split) const {
    auto cost = [&](int rank, const PipeAction& a) {
      const double f = split.flops[static_cast<size_t>(a.chunk * ranks_ + rank)];
      return a.op == PipeOp::forward ? f / 3 : 2 * f / 3;
    };
    const PipelineSimulation sim = simulate_pipeline(schedules_, cost, 0.0);
    TS_CHECK(sim.finished) << sim.error;
    return sim.makespan;
  }

 private:
  int ranks_;
  std::vector<std::vector<PipeAction>> schedules_;
};

struct StepScore {
  double makespan = 0;
  InterleavedScore split;
};

bool better(const StepScore& a, const StepScore& b) {
  if (int c = compare_costs({a.makespan}, {b.makespan})) return c < 0;
  return better(a.split, b.split);
}

// C(n, k), or limit + 1 once it exceeds limit.
int64_t splits_up_to(int n, int k, int64_t limit) {
  int64_t c = 1;
  for (int i = 1; i <= k; ++i) {
    c = c * (n - k + i) / i;
    if (c > limit) return limit + 1;
  }
  return c;
}

StageSplit balance_interleaved_step(const std::vector<LayerCost>& costs, StageSplit start, int ranks, int micro_batches) {
  const int S = static_cast<int>(start.bounds.size()) - 1, L = start.bounds.back();
  const InterleavedStep step(ranks, micro_batches, S / ranks);
  auto score = [&](const StageSplit& s) { return StepScore{step.makespan(s), interleaved_score(s, ranks)}; };
  StageSplit best = std::move(start);
  StepScore best_score = score(best);
  auto consider = [&](std::vector<int> bounds) {
    StageSplit cand = measure(costs, std::move(bounds));
    StepScore cand_score = score(cand);
    if (!better(cand_score, best_score)) return false;
    best = std::move(cand);
    best_score = std::move(cand_score);
    return true;
  };
  // Stages 0..S-2 take at least a layer each and the last any number: C(L, S - 1) splits.
  if (splits_up_to(L, S - 1, kExhaustiveInterleavedSplits) <= kExhaustiveInterleavedSplits) {
    std::vector<int> bounds(static_cast<size_t>(S + 1));
    bounds[0] = 0;
    bounds[static_cast<size_t>(S)] = L;
    // Inner bounds in increasing order: bounds[b] ranges over [bounds[b-1] + 1, L - (S - 1 - b)].
    std::function<void(int)> place = [&](int b) {
      if (b == S) return void(consider(bounds));
      for (int at = bounds[static_cast<size_t>(b - 1)] + 1; at <= L - (S - 1 - b); ++at) {
        bounds[static_cast<size_t>(b)] = at;
        place(b + 1);
      }
    };
    place(1);
    return best;
  }
  // Moves: one layer from any chunk to any other (the boundaries between them shift by one), until
  // none shortens the step.
  for (bool improved = true; improved;) {
    improved = false;
    for (int from = 0; from < S; ++from)
      for (int to = 0; to < S; ++to) {
        if (to == from) continue;
        std::vector<int> bounds = best.bounds;
        if (from < to)
          for (int b = from + 1; b <= to; ++b) --bounds[static_cast<size_t>(b)];
        else
          for (int b = to + 1; b <= from; ++b) ++bounds[static_cast<size_t>(b)];
        if (valid_bounds(bounds)) improved |= consider(std::move(bounds));
      }
  }
  return best;
}

}  // namespace

double interleaved_makespan(const StageSplit& split, int ranks, int micro_batches) {
  const int S = static_cast<int>(split.flops.size());
  return InterleavedStep(ranks, micro_batches, S / ranks).makespan(split);
}

std::string StageSplit::describe() const {
  std::string out;
  const double worst = *std::max_element(flops.begin(), flops.end());
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s[%d,%d) %.0f%%", s ? " " : "", bounds[s], bounds[s + 1], 100.0 * flops[s] / worst);
    out += buf;
  }
  return out;
}

Result<StageSplit> balance_stages(const ModelConfig& cfg, int64_t T, int stages, int ranks, int micro_batches) {
  const int L = static_cast<int>(cfg.n_layer);
  if (stages < 1 || stages > L)
    return invalid_argument("parallel.pp=" + std::to_string(stages) + " needs at least one layer per stage but the model has " +
                            std::to_string(L) + " layers: use parallel.pp <= " + std::to_string(L));
  const auto costs = model_piece_costs(cfg, T);
  // best[s][l]: the smallest possible (largest stage flops, largest stage bytes) when layers [0, l)
  // form stages 0..s-1; cut[s][l] the start of stage s-1 in that split.
  using Score = std::pair<double, double>;
  const Score inf{std::numeric_limits<double>::infinity(), 0};
  std::vector<std::vector<Score>> best(stages + 1, std::vector<Score>(L + 1, inf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(L + 1, 0));
  auto stage_cost = [&](int s, int lo, int hi) {  // stage s (0-based) holding layers [lo, hi)
    double f = 0, b = 0;
    for (int l = lo; l < hi; ++l) f += costs[l + 1].flops, b += costs[l + 1].param_bytes + costs[l + 1].act_bytes;
    if (s == 0) f += costs[0].flops, b += costs[0].param_bytes + costs[0].act_bytes;
    if (s == stages - 1) f += costs[L + 1].flops, b += costs[L + 1].param_bytes + costs[L + 1].act_bytes;
    return Score{f, b};
  };
  best[0][0] = {0, 0};
  for (int s = 1; s <= stages; ++s) {
    // Stages 0..s-1 cover [0, hi): all of it once s is the last; before that, at least a layer each
    // and enough left for the stages after s but the last.
    const int hi_from = s == stages ? L : s, hi_to = s == stages ? L : L - (stages - 1 - s);
    for (int hi = hi_from; hi <= hi_to; ++hi)
      for (int lo = s - 1; lo <= hi - min_stage_layers(s - 1, stages); ++lo) {
        if (best[s - 1][lo] == inf) continue;
        const Score here = stage_cost(s - 1, lo, hi);
        const Score cand{std::max(best[s - 1][lo].first, here.first), std::max(best[s - 1][lo].second, here.second)};
        if (cand < best[s][hi]) best[s][hi] = cand, cut[s][hi] = lo;
      }
  }
  std::vector<int> bounds(stages + 1);
  bounds[stages] = L;
  for (int s = stages; s > 0; --s) bounds[s - 1] = cut[s][bounds[s]];
  StageSplit split = measure(costs, std::move(bounds));
  if (ranks <= 0 || ranks >= stages) return split;
  split = balance_rank_totals(costs, std::move(split), ranks);
  const PipelineShape shape{ranks, micro_batches, stages / ranks};
  if (micro_batches < 1 || stages % ranks != 0 || !validate_pipeline_shape(PipelineScheduleKind::interleaved, shape).ok())
    return split;
  return balance_interleaved_step(costs, std::move(split), ranks, micro_batches);
}

Result<StageSplit> split_from_layer_counts(const ModelConfig& cfg, int64_t T, const std::vector<int64_t>& counts) {
  std::vector<int> bounds{0};
  for (size_t s = 0; s < counts.size(); ++s) {
    if (counts[s] < min_stage_layers(static_cast<int>(s), static_cast<int>(counts.size())))
      return invalid_argument("parallel.stage_layers[" + std::to_string(s) + "] = " + std::to_string(counts[s]) +
                              ": every stage but the last needs at least one layer (the last may hold only the head)");
    bounds.push_back(bounds.back() + static_cast<int>(counts[s]));
  }
  if (bounds.back() != cfg.n_layer)
    return invalid_argument("parallel.stage_layers sums to " + std::to_string(bounds.back()) + " layers but the model has " +
                            std::to_string(cfg.n_layer) + ": make the counts add up to model.n_layer");
  return measure(model_piece_costs(cfg, T), std::move(bounds));
}

}  // namespace tessera
