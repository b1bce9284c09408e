// Layout search: enumerate, plan memory, predict time, rank (see layout_search.h).
#include "plan/layout_search.h"

#include <algorithm>

#include "plan/memory_plan.h"

namespace tessera {

namespace {

std::vector<int64_t> divisors(int64_t k) {
  std::vector<int64_t> out;
  for (int64_t b = 1; b <= k; ++b)
    if (k % b == 0) out.push_back(b);
  return out;
}

}  // namespace

std::string short_layout_name(const RunConfig& c) {
  const ParallelConfig& p = c.parallel;
  std::string s = "dp=" + std::to_string(p.dp) + " tp=" + std::to_string(p.tp) + " pp=" + std::to_string(p.pp);
  if (p.pp > 1)
    s += " " + std::string(pipeline_schedule_name(p.schedule)) +
         (p.virtual_stages > 1 ? "x" + std::to_string(p.virtual_stages) : "");
  if (p.sequence_parallel) s += " sp";
  if (p.cp > 1) s += " cp=" + std::to_string(p.cp) + " " + p.cp_mode;
  if (p.ep > 1) s += " ep=" + std::to_string(p.ep);
  return s + " zero=" + std::to_string(p.zero) + " mb=" + std::to_string(c.train.micro_batch) +
         " recompute=" + std::string(recompute_name(c.train.recompute));
}

std::vector<std::string> layout_overrides(const RunConfig& c) {
  const ParallelConfig& p = c.parallel;
  return {"parallel.dp=" + std::to_string(p.dp),
          "parallel.tp=" + std::to_string(p.tp),
          "parallel.pp=" + std::to_string(p.pp),
          "parallel.cp=" + std::to_string(p.cp),
          "parallel.cp_mode=" + p.cp_mode,
          "parallel.ep=" + std::to_string(p.ep),
          "parallel.schedule=" + std::string(pipeline_schedule_name(p.schedule)),
          "parallel.virtual_stages=" + std::to_string(p.virtual_stages),
          "parallel.zero=" + std::to_string(p.zero),
          std::string("parallel.sequence_parallel=") + (p.sequence_parallel ? "true" : "false"),
          "train.micro_batch=" + std::to_string(c.train.micro_batch),
          "train.recompute=" + std::string(recompute_name(c.train.recompute)),
          "train.batch_tokens=" + std::to_string(c.train.batch_tokens)};
}

Result<LayoutSearch> search_layouts(const RunConfig& base, int world_size, const HardwareSpec& hw) {
  LayoutSearch out;
  out.budget_bytes = base.train.memory_budget_mb > 0 ? static_cast<int64_t>(base.train.memory_budget_mb * 1048576.0)
                                                     : static_cast<int64_t>(hw.memory_bytes);
  const int64_t T = base.data.seq_len, batch = base.train.batch_tokens;
  int64_t smallest_peak = -1;
  // The grids: dp x tp x pp on what cp and ep leave (ep only for a mixture-of-experts model; the two
  // are not composed, so one of them is 1). cp comes in both modes.
  struct Axes {
    int cp, ep;
    std::string cp_mode;
  };
  std::vector<Axes> axes = {{1, 1, base.parallel.cp_mode}};
  for (int64_t k : divisors(world_size)) {
    if (k == 1) continue;
    axes.push_back({static_cast<int>(k), 1, "ulysses"});
    axes.push_back({static_cast<int>(k), 1, "ring"});
    if (base.model.is_moe()) axes.push_back({1, static_cast<int>(k), base.parallel.cp_mode});
  }
  std::vector<std::pair<Axes, GridShape>> grids;
  for (const Axes& a : axes)
    for (const GridShape& g : grid_factorisations(world_size / (a.cp * a.ep))) grids.push_back({a, g});
  for (const auto& [ax, g] : grids) {
    const int64_t data_ranks = static_cast<int64_t>(g.dp) * ax.ep;  // ranks reading different data
    if (batch % (T * data_ranks) != 0) continue;
    std::vector<std::pair<PipelineScheduleKind, int>> schedules = {{PipelineScheduleKind::one_f_one_b, 1}};
    if (g.pp > 1) {
      schedules.push_back({PipelineScheduleKind::gpipe, 1});
      schedules.push_back({PipelineScheduleKind::zb_h1, 1});
      for (int V = 2; V <= 4 && g.pp * V <= base.model.n_layer; ++V)
        schedules.push_back({PipelineScheduleKind::interleaved, V});
    }
    const int replicas = g.dp * ax.cp * ax.ep;  // ZeRO shards over them
    for (int64_t mb : divisors(batch / (T * data_ranks)))
      for (auto [kind, V] : schedules)
        for (int zero = 0; zero <= (replicas > 1 ? 3 : 0); ++zero)
          for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full})
            for (bool sp : g.tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
              RunConfig c = base;
              c.parallel.dp = g.dp;
              c.parallel.tp = g.tp;
              c.parallel.pp = g.pp;
              c.parallel.cp = ax.cp;
              c.parallel.cp_mode = ax.cp_mode;
              c.parallel.ep = ax.ep;
              c.parallel.schedule = kind;
              c.parallel.virtual_stages = V;
              c.parallel.stage_layers.clear();
              c.parallel.zero = zero;
              c.parallel.sequence_parallel = sp;
              c.train.micro_batch = mb;
              c.train.grad_accum = batch / (mb * T * data_ranks);
              c.train.recompute = rc;
              Result<StepTimePrediction> time = predict_step_time(c, world_size, hw);
              if (!time.ok()) continue;  // not a valid layout (the checks of plan_parallel_layout)
              Result<MemoryPlan> mem = plan_memory_peaks(c, world_size);
              if (!mem.ok()) continue;
              ++out.enumerated;
              const int64_t peak = mem->peak();
              if (smallest_peak < 0 || peak < smallest_peak) smallest_peak = peak;
              if (out.budget_bytes > 0 && peak > out.budget_bytes) {
                ++out.over_budget;
                continue;
              }
              LayoutCandidate cand{c, "", *time, peak};
              for (const std::string& o : layout_overrides(c)) cand.overrides += (cand.overrides.empty() ? "" : " ") + o;
              out.ranked.push_back(std::move(cand));
            }
  }
  if (out.enumerated == 0)
    return invalid_argument("no valid layout of this model on " + std::to_string(world_size) +
                            " ranks keeps train.batch_tokens = " + std::to_string(batch) +
                            ": choose --ranks so that it divides train.batch_tokens / data.seq_len, or change "
                            "train.batch_tokens");
  if (out.ranked.empty())
    return invalid_argument("none of the " + std::to_string(out.enumerated) + " valid layouts on " +
                            std::to_string(world_size) + " ranks fits the memory budget of " +
                            format_mib(out.budget_bytes) + " MiB (the smallest peak is " + format_mib(smallest_peak) +
                            " MiB): use more ranks, or raise train.memory_budget_mb / the hardware's memory_gib");
  std::stable_sort(out.ranked.begin(), out.ranked.end(), [](const LayoutCandidate& a, const LayoutCandidate& b) {
    if (a.time.tokens_per_s != b.time.tokens_per_s) return a.time.tokens_per_s > b.time.tokens_per_s;
    return a.peak_bytes < b.peak_bytes;
  });
  return out;
}

}  // namespace tessera
