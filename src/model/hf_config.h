// ModelConfig <-> Hugging Face config.json (GPT2Config for the GPT-2 family, LlamaConfig for the
// LLaMA family): what `tessera export --hf` writes and what importing an HF directory reads.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "model/config.h"

namespace tessera {

// Special token ids the tokenizer defines (absent for the byte tokenizer); config.json and
// generation_config.json carry them so generation stops where the tokenizer says.
struct HfSpecialTokens {
  std::optional<int64_t> bos, eos, pad;
};

// Ok when transformers represents `cfg` exactly; otherwise names the field that it cannot.
Status check_hf_representable(const ModelConfig& cfg);

// config.json for `cfg` (check_hf_representable first; its error is returned).
Result<nlohmann::json> hf_config_json(const ModelConfig& cfg, const HfSpecialTokens& special = {});
// generation_config.json: the special tokens, nothing else (greedy defaults stay HF's).
nlohmann::json hf_generation_config_json(const HfSpecialTokens& special);

// The ModelConfig a config.json describes. Refuses (naming the key and the value Tessera needs)
// any setting Tessera's model does not compute: another model_type, activation, RoPE scaling,
// attention or MLP biases in LLaMA, a head_dim other than hidden_size / heads. `where` labels
// messages (the file).
Result<ModelConfig> model_config_from_hf_json(const nlohmann::json& j, const std::string& where);

// The first architecture field in which `a` and `b` differ, as "norm_eps: 1e-05 vs 1e-06";
// empty when they compute the same model (the name is not compared).
std::string first_model_difference(const ModelConfig& a, const ModelConfig& b);

}  // namespace tessera
