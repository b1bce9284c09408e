// Reading a Hugging Face model directory's config.json, with the errors a user can act on.
#include "model/hf_directory.h"

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "model/hf_config.h"

namespace tessera {

namespace fs = std::filesystem;

namespace {
// config.json is small; a larger file is not one (and is not parsed into memory).
constexpr std::uintmax_t kMaxConfigBytes = 1 << 20;
}  // namespace

bool is_hf_directory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

std::string hf_directory_weights(const std::string& dir) { return (fs::path(dir) / kHfWeightsFile).string(); }

Result<ModelConfig> read_hf_directory_config(const std::string& dir) {
  const fs::path d(dir);
  const std::string config = (d / kHfConfigFile).string();
  std::error_code ec;
  if (!fs::is_regular_file(config, ec))
    return not_found("'" + dir + "' is a directory without " + kHfConfigFile +
                     ": pass a directory written by `tessera export --hf` (or a Hugging Face GPT-2 / LLaMA "
                     "model directory), or a .safetensors file");
  if (!fs::is_regular_file(d / kHfWeightsFile, ec)) {
    std::string why = "it has no " + std::string(kHfWeightsFile);
    if (fs::exists(d / "model.safetensors.index.json", ec))
      why = "its weights are sharded (model.safetensors.index.json); Tessera reads one model.safetensors: "
            "save it with save_pretrained(dir, max_shard_size=\"100GB\")";
    else if (fs::exists(d / "pytorch_model.bin", ec))
      why = "its weights are a PyTorch pickle (pytorch_model.bin); Tessera reads safetensors only: save it with "
            "save_pretrained(dir, safe_serialization=True)";
    return not_found("Hugging Face directory '" + dir + "': " + why);
  }
  const auto size = fs::file_size(config, ec);
  if (ec || size > kMaxConfigBytes)
    return corrupt_data(config + " is larger than 1 MiB: not a model config.json");
  TS_ASSIGN_OR_RETURN(std::string text, read_file(config));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt_data(config + " is not valid JSON; re-export the directory");
  return model_config_from_hf_json(j, config);
}

}  // namespace tessera
