// Where eval, sample and export get a trained model from: a run directory (its latest complete
// checkpoint), a checkpoint directory, a Hugging Face-style safetensors weights file, or a
// Hugging Face model directory.
#pragma once
#include <memory>
#include <string>

#include "core/status.h"
#include "model/config.h"
#include "model/param_layout.h"

namespace tessera {

struct LoadedModel {
  ModelConfig config;
  std::unique_ptr<ParamStore> store;
  std::string data_dir;  // the dataset the run trained on ("" for a weights file)
  int64_t step = 0;      // checkpoint step (0 for a weights file)
  std::string source;    // what was loaded, for messages
};

// path: a run directory (uses its latest complete checkpoint) or a step_<n> checkpoint directory.
Result<LoadedModel> load_model_from_checkpoint(const std::string& path);
// Weights written by `tessera export` (config from its metadata) or, when `preset` is given, any
// file with Hugging Face GPT-2 / LLaMA names matching that preset. A directory is read as a
// Hugging Face model directory (`tessera export --hf`): config.json gives the config.
Result<LoadedModel> load_model_from_weights(const std::string& path, const std::string& preset = "");

}  // namespace tessera
