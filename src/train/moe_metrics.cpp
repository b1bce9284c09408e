// Gathering the MoE layers' expert load over the ranks, its metrics JSON and the collapse warning.
#include "train/moe_metrics.h"

#include <cstdio>

namespace tessera {

Result<std::vector<MoeLoadSummary>> gather_moe_load(Communicator& ranks, const ModelConfig& cfg,
                                                    const std::vector<Transformer::MoeLayerLoad>& local) {
  const int64_t L = cfg.n_layer, E = cfg.moe_experts;
  // Per layer: tokens (E), routed (E), dropped, entropy sum, forwards. Doubles hold these counts exactly.
  const int64_t W = 2 * E + 3;
  std::vector<double> mine(static_cast<size_t>(L * W), 0.0);
  for (const auto& l : local) {
    double* w = mine.data() + l.layer * W;
    for (int64_t e = 0; e < E; ++e) {
      w[e] = static_cast<double>(l.tokens[static_cast<size_t>(e)]);
      w[E + e] = static_cast<double>(l.routed[static_cast<size_t>(e)]);
    }
    w[2 * E] = static_cast<double>(l.dropped);
    w[2 * E + 1] = l.entropy_sum;
    w[2 * E + 2] = static_cast<double>(l.forwards);
  }
  std::vector<double> all(mine.size() * static_cast<size_t>(ranks.size()));
  if (ranks.size() == 1) {
    all = mine;
  } else {
    const Status st =
        ranks.all_gather_async(mine.data(), all.data(), mine.size() * sizeof(double), DType::u8).wait();
    if (!st.ok()) return Status(st.code(), "gathering the MoE layers' expert load for metrics: " + st.message());
  }
  std::vector<MoeLoadSummary> out;
  for (int64_t layer = 0; layer < L; ++layer) {
    if (!cfg.is_moe_layer(layer)) continue;
    MoeLoadSummary s;
    s.layer = static_cast<int>(layer);
    s.tokens.assign(static_cast<size_t>(E), 0);
    s.routed.assign(static_cast<size_t>(E), 0);
    double entropy = 0, forwards = 0;
    for (int r = 0; r < ranks.size(); ++r) {
      const double* w = all.data() + static_cast<size_t>(r) * mine.size() + layer * W;
      for (int64_t e = 0; e < E; ++e) {
        s.tokens[static_cast<size_t>(e)] += static_cast<int64_t>(w[e]);
        s.routed[static_cast<size_t>(e)] += static_cast<int64_t>(w[E + e]);
      }
      s.dropped += static_cast<int64_t>(w[2 * E]);
      entropy += w[2 * E + 1];
      forwards += w[2 * E + 2];
    }
    s.entropy = forwards > 0 ? entropy / forwards : 0;
    int64_t assignments = 0;
    for (int64_t e = 0; e < E; ++e) assignments += s.routed[static_cast<size_t>(e)];
    const double tokens = static_cast<double>(assignments) / static_cast<double>(cfg.moe_top_k);
    for (int64_t e = 0; e < E; ++e) {
      const double share = tokens > 0 ? static_cast<double>(s.routed[static_cast<size_t>(e)]) / tokens : 0;
      if (share > s.max_share) {
        s.max_share = share;
        s.max_expert = static_cast<int>(e);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

nlohmann::json moe_load_json(const std::vector<MoeLoadSummary>& load) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : load)
    out.push_back({{"layer", s.layer}, {"tokens", s.tokens}, {"dropped", s.dropped}, {"entropy", s.entropy},
                   {"max_share", s.max_share}});
  return out;
}

std::vector<std::string> moe_collapse_warnings(const std::vector<MoeLoadSummary>& load, double share, int64_t step) {
  std::vector<std::string> out;
  if (!(share > 0)) return out;
  for (const auto& s : load) {
    if (s.max_share <= share) continue;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "step %lld: MoE layer %d: expert %d was routed %.0f%% of the tokens (more than "
                  "train.moe_warn_share = %.2f): the router may be collapsing; raise model.moe_aux_loss",
                  static_cast<long long>(step), s.layer, s.max_expert, 100.0 * s.max_share, share);
    out.emplace_back(buf);
  }
  return out;
}

}  // namespace tessera
