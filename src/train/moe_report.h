// The run's expert load: the logged steps' per-layer routing (train/moe_metrics.h) summed on the
// lead rank, drawn as timeline counter tracks, and the end-of-run report that names the imbalanced
// MoE layers and, under expert parallelism, the ep rank whose experts computed the most rows.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "observe/timeline.h"
#include "train/moe_metrics.h"

namespace tessera {

// A share counts as imbalanced above this multiple of its even value (1/E per expert, 1/ep per rank).
constexpr double kMoeImbalanced = 1.25;

// The logged steps' loads, summed per MoE layer (entropy: the sum of the steps' means), and each
// layer's worst step: the largest share of its tokens one expert was routed (max_share).
struct MoeRunLoad {
  std::vector<MoeLoadSummary> layers;
  struct Peak {
    double share = 0;
    int expert = 0;
    int64_t step = 0;
  };
  std::vector<Peak> peaks;  // per layer, as `layers`
  int64_t steps = 0;
  void add(const std::vector<MoeLoadSummary>& load, int64_t step);
};

// One MoE layer over the run: each expert's share of the routed assignments, and each ep rank's
// share of the rows its experts computed (the kept assignments of experts [d E/ep, (d+1) E/ep)).
struct MoeLayerBalance {
  int layer = 0;
  std::vector<double> expert_share, rank_share;
  int busiest_expert = 0, busiest_rank = 0;
  int64_t dropped = 0;
  double entropy = 0;  // mean over the logged steps (nats; ln E when uniform)
  MoeRunLoad::Peak peak;
  bool uneven = false;     // over the run, an expert's or ep rank's share above kMoeImbalanced x even
  bool collapsed = false;  // in some logged step one expert was routed more than the warning share
  bool imbalanced() const { return uneven || collapsed; }
};
// warn_share: train.moe_warn_share (0: no step counts as collapsed).
std::vector<MoeLayerBalance> moe_layer_balance(const MoeRunLoad& load, int ep, double warn_share);

// The report's lines: a summary, then one per imbalanced layer (at most `max_layers`, then a count).
std::vector<std::string> moe_run_report(const std::vector<MoeLayerBalance>& balance, int64_t steps, int64_t experts,
                                        int ep, size_t max_layers = 8);
// The metrics event: {"event": "moe_report", "logged_steps", "layers": [{layer, expert_share,
// rank_share, dropped, entropy, imbalanced}]} (the caller adds "step").
nlohmann::json moe_run_report_json(const std::vector<MoeLayerBalance>& balance, int64_t steps);

// One counter sample per MoE layer of a logged step: "MoE layer L tokens" with a series per expert,
// and "MoE layer L" with dropped and entropy.
void add_moe_counters(Timeline& timeline, double t_s, const std::vector<MoeLoadSummary>& step);

}  // namespace tessera
