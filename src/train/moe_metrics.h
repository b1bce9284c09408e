// Expert load of a mixture-of-experts run in the metrics: every rank's per-layer routing of the
// logged step summed over the ranks (dp replicas see different tokens; pp stages own different
// layers), and the router-collapse warning (docs/moe.md).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "core/status.h"
#include "model/config.h"
#include "model/transformer.h"

namespace tessera {

// One MoE layer over all ranks: kept and routed assignments per expert, dropped assignments, the
// mean router entropy (nats) and the largest share of the layer's tokens one expert was routed.
struct MoeLoadSummary {
  int layer = 0;
  std::vector<int64_t> tokens, routed;
  int64_t dropped = 0;
  double entropy = 0;
  double max_share = 0;  // max_e routed_e / tokens routed (a token counts once per expert: K/E when even)
  int max_expert = 0;
};

// Collective over `ranks` (every rank calls it, with its own layers' loads): the sum per layer of
// cfg's MoE layers, in layer order.
Result<std::vector<MoeLoadSummary>> gather_moe_load(Communicator& ranks, const ModelConfig& cfg,
                                                    const std::vector<Transformer::MoeLayerLoad>& local);

// [{"layer", "tokens": [..], "dropped", "entropy", "max_share"}, ...] for the step's metrics event.
nlohmann::json moe_load_json(const std::vector<MoeLoadSummary>& load);

// The warnings for layers where one expert takes more than `share` of the tokens (0: none).
std::vector<std::string> moe_collapse_warnings(const std::vector<MoeLoadSummary>& load, double share, int64_t step);

}  // namespace tessera
