// Saving and restoring the complete training state (parameters, AdamW moments and step, data
// position, schedule step) through the layout-independent checkpoint library.
#pragma once
#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "data/loader.h"
#include "model/config.h"
#include "model/config_json.h"
#include "model/param_layout.h"
#include "optim/adamw.h"
#include "parallel/gradient_sync.h"

namespace tessera {

struct TrainingState {
  int64_t step = 0;             // steps completed
  LoaderPosition loader;
  int64_t adam_steps = 0;
};

// Collective over `comm` (every rank calls it). Each rank writes the parameters and AdamW moments
// of its `owned` range of the flat buffers (GradientSync::checkpoint_range; the optimizer must
// cover it) into its own shard file; rank 0 gathers the records, writes the manifest and prunes
// old checkpoints. All ranks return the same outcome.
Status save_training_checkpoint(Communicator& comm, const std::string& run_dir, const ModelConfig& cfg,
                                const ParamStore& store, AdamW& opt, FlatRange owned, const TrainingState& state,
                                int keep_last, const nlohmann::json& run_config);

// Loads `checkpoint_dir` (a step_<n> directory) into store/opt after checking it was saved for the
// same model; returns the saved state. Never modifies the checkpoint.
Result<TrainingState> load_training_checkpoint(const std::string& checkpoint_dir, const ModelConfig& cfg,
                                               ParamStore& store, AdamW* opt);

}  // namespace tessera
