// ModelConfig as JSON: what checkpoints record, and the model part of a run config's JSON form.
#pragma once
#include <nlohmann/json.hpp>

#include "core/status.h"
#include "model/config.h"

namespace tessera {

// The architecture fields only (arch, sizes, eps, theta, tied_embeddings); no name or preset.
nlohmann::json model_config_json(const ModelConfig& cfg);
// Reads model_config_json's fields back and validates them.
Result<ModelConfig> model_config_from_json(const nlohmann::json& j);

}  // namespace tessera
