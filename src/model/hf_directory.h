// A Hugging Face model directory as Tessera reads it: config.json (the model config) and
// model.safetensors (the weights). What `tessera export --hf` writes; HF's save_pretrained of a
// GPT-2 or LLaMA model with safe_serialization gives the same two files.
#pragma once
#include <string>

#include "core/status.h"
#include "model/config.h"

namespace tessera {

inline constexpr const char* kHfConfigFile = "config.json";
inline constexpr const char* kHfWeightsFile = "model.safetensors";
inline constexpr const char* kHfGenerationConfigFile = "generation_config.json";

// True when `path` is a directory (what weights options then read as an HF model directory).
bool is_hf_directory(const std::string& path);
// dir/model.safetensors.
std::string hf_directory_weights(const std::string& dir);
// The ModelConfig of dir/config.json. The error says what is missing: no config.json, sharded or
// PyTorch-pickle weights instead of one model.safetensors, a config Tessera does not compute.
Result<ModelConfig> read_hf_directory_config(const std::string& dir);

}  // namespace tessera
