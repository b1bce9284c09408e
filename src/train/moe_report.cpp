// The run's expert load: summing the logged steps, the balance per layer and per ep rank, the
// end-of-run lines and event, and the timeline's counter tracks.
#include "train/moe_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tessera {

void MoeRunLoad::add(const std::vector<MoeLoadSummary>& load, int64_t step) {
  if (load.empty()) return;
  if (peaks.size() < load.size()) peaks.resize(load.size());
  for (size_t i = 0; i < load.size(); ++i)
    if (load[i].max_share > peaks[i].share) peaks[i] = {load[i].max_share, load[i].max_expert, step};
  if (layers.empty()) {
    layers = load;
  } else {
    for (size_t i = 0; i < layers.size() && i < load.size(); ++i) {
      MoeLoadSummary& s = layers[i];
      for (size_t e = 0; e < s.tokens.size(); ++e) {
        s.tokens[e] += load[i].tokens[e];
        s.routed[e] += load[i].routed[e];
      }
      s.dropped += load[i].dropped;
      s.entropy += load[i].entropy;
    }
  }
  ++steps;
}

namespace {
int argmax(const std::vector<double>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}
// Each value over the sum (all 0 when the sum is).
std::vector<double> shares(const std::vector<int64_t>& counts) {
  double total = 0;
  for (int64_t c : counts) total += static_cast<double>(c);
  std::vector<double> out;
  for (int64_t c : counts) out.push_back(total > 0 ? static_cast<double>(c) / total : 0.0);
  return out;
}
}  // namespace

std::vector<MoeLayerBalance> moe_layer_balance(const MoeRunLoad& load, int ep, double warn_share) {
  std::vector<MoeLayerBalance> out;
  for (size_t i = 0; i < load.layers.size(); ++i) {
    const MoeLoadSummary& s = load.layers[i];
    MoeLayerBalance b;
    if (i < load.peaks.size()) b.peak = load.peaks[i];
    b.collapsed = warn_share > 0 && b.peak.share > warn_share;
    b.layer = s.layer;
    const size_t E = s.routed.size();
    b.expert_share = shares(s.routed);
    b.busiest_expert = argmax(b.expert_share);
    b.uneven = b.expert_share[static_cast<size_t>(b.busiest_expert)] > kMoeImbalanced / static_cast<double>(E);
    if (ep > 1) {  // rank d owns experts [d E/ep, (d+1) E/ep) and computes their kept rows
      std::vector<int64_t> rows(static_cast<size_t>(ep), 0);
      for (size_t e = 0; e < E; ++e) rows[e / (E / static_cast<size_t>(ep))] += s.tokens[e];
      b.rank_share = shares(rows);
      b.busiest_rank = argmax(b.rank_share);
      b.uneven = b.uneven || b.rank_share[static_cast<size_t>(b.busiest_rank)] > kMoeImbalanced / ep;
    }
    b.dropped = s.dropped;
    b.entropy = load.steps > 0 ? s.entropy / static_cast<double>(load.steps) : 0;
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<std::string> moe_run_report(const std::vector<MoeLayerBalance>& balance, int64_t steps, int64_t experts,
                                        int ep, size_t max_layers) {
  std::vector<std::string> out;
  if (balance.empty()) return out;
  size_t imbalanced = 0;
  for (const MoeLayerBalance& b : balance) imbalanced += b.imbalanced() ? 1 : 0;
  char buf[480];
  std::snprintf(buf, sizeof buf,
                "moe load over %lld logged step(s): %zu of %zu MoE layer(s) imbalanced (an expert%s above %.2fx "
                "its even share over the run, or a step past train.moe_warn_share)",
                static_cast<long long>(steps), imbalanced, balance.size(), ep > 1 ? " or ep rank" : "", kMoeImbalanced);
  out.emplace_back(buf);
  size_t listed = 0;
  for (const MoeLayerBalance& b : balance) {
    if (!b.imbalanced()) continue;
    if (listed == max_layers) {
      std::snprintf(buf, sizeof buf, "  ... and %zu more imbalanced layer(s) (metrics.jsonl: moe_report)",
                    imbalanced - listed);
      out.emplace_back(buf);
      break;
    }
    ++listed;
    int n = std::snprintf(buf, sizeof buf,
                          "  layer %d: expert %d routed %.0f%% of the assignments (even %.0f%%), %lld dropped, "
                          "router entropy %.2f of %.2f nats",
                          b.layer, b.busiest_expert, 100 * b.expert_share[static_cast<size_t>(b.busiest_expert)],
                          100.0 / static_cast<double>(experts), static_cast<long long>(b.dropped), b.entropy,
                          std::log(static_cast<double>(experts)));
    auto append = [&](auto... args) {
      if (n > 0 && static_cast<size_t>(n) < sizeof buf) n += std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), args...);
    };
    if (ep > 1) {
      const int64_t per = experts / ep, first = b.busiest_rank * per;
      append("; ep rank %d (experts %lld-%lld) computed %.0f%% of the expert rows (even %.0f%%)", b.busiest_rank,
             static_cast<long long>(first), static_cast<long long>(first + per - 1),
             100 * b.rank_share[static_cast<size_t>(b.busiest_rank)], 100.0 / ep);
    }
    if (b.collapsed)
      append("; at step %lld expert %d was routed %.0f%% of the tokens", static_cast<long long>(b.peak.step),
             b.peak.expert, 100 * b.peak.share);
    out.emplace_back(buf);
  }
  return out;
}

nlohmann::json moe_run_report_json(const std::vector<MoeLayerBalance>& balance, int64_t steps) {
  nlohmann::json layers = nlohmann::json::array();
  for (const MoeLayerBalance& b : balance) {
    nlohmann::json j = {{"layer", b.layer},
                        {"expert_share", b.expert_share},
                        {"dropped", b.dropped},
                        {"entropy", b.entropy},
                        {"uneven", b.uneven},
                        {"collapsed", b.collapsed},
                        {"peak", {{"step", b.peak.step}, {"expert", b.peak.expert}, {"share", b.peak.share}}}};
    if (!b.rank_share.empty()) j["rank_share"] = b.rank_share;
    layers.push_back(std::move(j));
  }
  return {{"event", "moe_report"}, {"logged_steps", steps}, {"layers", std::move(layers)}};
}

void add_moe_counters(Timeline& timeline, double t_s, const std::vector<MoeLoadSummary>& step) {
  if (!timeline.enabled()) return;
  for (const MoeLoadSummary& s : step) {
    std::vector<std::pair<std::string, double>> tokens;
    for (size_t e = 0; e < s.tokens.size(); ++e)
      tokens.emplace_back("expert " + std::to_string(e), static_cast<double>(s.tokens[e]));
    timeline.add_counter("MoE layer " + std::to_string(s.layer) + " tokens", t_s, std::move(tokens));
    timeline.add_counter("MoE layer " + std::to_string(s.layer), t_s,
                         {{"dropped", static_cast<double>(s.dropped)}, {"entropy", s.entropy}});
  }
}

}  // namespace tessera
