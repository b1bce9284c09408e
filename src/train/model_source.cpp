// Loading models for inference commands.
#include "train/model_source.h"

#include <filesystem>

#include "checkpoint/catalog.h"
#include "checkpoint/reader.h"
#include "model/hf_directory.h"
#include "model/hf_weights.h"
#include "model/safetensors.h"
#include "train/checkpoint_fingerprints.h"
#include "train/train_checkpoint.h"

namespace tessera {

Result<LoadedModel> load_model_from_checkpoint(const std::string& path) {
  std::string dir = path;
  namespace fs = std::filesystem;
  // Name what was expected: the checkpoint reader's own messages assume a checkpoint directory.
  if (!fs::is_directory(path))
    return not_found("no run directory '" + path + "': pass --run <train.out_dir of a run> or one of its " +
                     "checkpoints/step_<N> directories");
  if (!fs::exists(fs::path(path) / "checkpoints") && !fs::exists(fs::path(path) / "manifest.json"))
    return not_found("'" + path + "' holds no checkpoint: it is neither a run directory (with checkpoints/) nor a " +
                     "checkpoints/step_<N> directory; train first or pass the run's train.out_dir");
  if (fs::exists(fs::path(path) / "checkpoints")) {
    auto latest = checkpoint::find_latest_complete(path);
    if (!latest.ok())
      return not_found("run " + path + " has no complete checkpoint (" + latest.status().message() +
                       "); train it first or pass a checkpoint directory");
    dir = latest->path;
  }
  TS_ASSIGN_OR_RETURN(checkpoint::CheckpointReader reader, checkpoint::open_checkpoint(dir));
  LoadedModel lm;
  TS_ASSIGN_OR_RETURN(lm.config, model_config_from_json(reader.config()));
  lm.store = std::make_unique<ParamStore>(ParamLayout(lm.config));
  for (const auto& p : lm.store->layout().params())
    TS_RETURN_IF_ERROR(reader.read_f32("param/" + p.name, 0, p.numel, lm.store->params() + p.offset));
  // The whole model, parameters only: its fingerprints must be the saved ones.
  TS_RETURN_IF_ERROR(compare_fingerprints(
      dir, reader.tensors(), partial_fingerprints({CheckpointChunk{lm.store.get(), nullptr, {0, lm.store->numel()}}})));
  lm.step = reader.step();
  lm.source = dir;
  try {
    lm.data_dir = reader.state().at("run_config").at("data").at("dir").get<std::string>();
  } catch (const std::exception&) {
    lm.data_dir.clear();
  }
  return lm;
}

Result<LoadedModel> load_model_from_weights(const std::string& path, const std::string& preset) {
  LoadedModel lm;
  if (is_hf_directory(path)) {
    // config.json says what the model is; a preset must agree with it (import_hf_weights checks).
    if (preset.empty()) {
      TS_ASSIGN_OR_RETURN(lm.config, read_hf_directory_config(path));
    } else {
      TS_ASSIGN_OR_RETURN(lm.config, model_preset(preset));
    }
    lm.store = std::make_unique<ParamStore>(ParamLayout(lm.config));
    TS_RETURN_IF_ERROR(import_hf_weights(path, lm.config, lm.store->layout(), lm.store->params()));
    lm.source = path;
    return lm;
  }
  TS_ASSIGN_OR_RETURN(SafetensorsFile file, open_safetensors(path));
  if (!preset.empty()) {
    TS_ASSIGN_OR_RETURN(lm.config, model_preset(preset));
  } else {
    auto cfg = config_from_metadata(file);
    if (!cfg.ok())
      return invalid_argument(path + " carries no Tessera model metadata (" + cfg.status().message() +
                              "); name its architecture with --model <preset>, e.g. --model gpt2");
    lm.config = cfg.value();
  }
  lm.store = std::make_unique<ParamStore>(ParamLayout(lm.config));
  TS_RETURN_IF_ERROR(import_hf_weights(file, lm.config, lm.store->layout(), lm.store->params()));
  lm.source = path;
  return lm;
}

}  // namespace tessera
