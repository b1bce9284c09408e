// Saving and restoring the complete training state (parameters, AdamW moments and step, data
// position, schedule step) through the layout-independent checkpoint library.
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/background_prune.h"
#include "checkpoint/writer.h"
#include "comm/communicator.h"
#include "data/loader.h"
#include "model/config.h"
#include "model/config_json.h"
#include "model/param_layout.h"
#include "optim/adamw.h"
#include "parallel/gradient_sync.h"
#include "train/fault_injection.h"

namespace tessera {

struct TrainingState {
  int64_t step = 0;             // steps completed
  LoaderPosition loader;
  int64_t adam_steps = 0;
};

// A tensor a gradient strategy saves beside the model's parameters and moments (local SGD's outer
// and per-replica state): elements [global_offset, global_offset + numel) of the flattened `key`.
struct ExtraTensor {
  std::string key;
  std::vector<int64_t> global_shape;
  int64_t global_offset = 0, numel = 0;
  const float* data = nullptr;
};

// One model chunk a rank saves: its parameters, the optimizer over them (covering `owned`; null with
// an empty `owned` on a rank that owns no optimizer state) and the part of its flat buffers it writes
// (ParameterUpdate::owned_state). A rank holds one chunk, or
// several under the interleaved pipeline schedule.
struct CheckpointChunk {
  const ParamStore* store = nullptr;
  AdamW* opt = nullptr;
  FlatRange owned;
  std::vector<ExtraTensor> extra = {};  // saved with the chunk under their own keys
};

// A contiguous run of one tensor that a rank saves: flat-buffer elements
// [flat_offset, flat_offset + numel) hold elements [global_offset, global_offset + numel) of the
// flattened global tensor `param->name` (shape param->global_shape). numel 0: nothing of the
// tensor lies in the owned range, but the rank still registers its key.
struct SavedPiece {
  const ParamInfo* param = nullptr;
  int64_t flat_offset = 0;
  int64_t global_offset = 0;
  int64_t numel = 0;
};

// What a rank holding `layout` writes of the `owned` part of its flat buffers: each tensor's
// tensor-parallel pieces (ParamLayout::shard_pieces) cut to `owned`, except the tensors another
// rank writes instead -- replicated tensors on tp ranks other than 0, dense tensors on ep ranks other
// than 0 of a layout storing only its experts, and the last pipeline stage's copy of a tied wte (the
// first stage saves the real one). Over all ranks of a dp x pp x tp grid
// whose owned ranges split each layout's buffer, every element of the model is written once.
std::vector<SavedPiece> checkpoint_pieces(const ParamLayout& layout, FlatRange owned);

// Collective over `comm` (every rank calls it). Each rank writes the parameters and AdamW moments
// of its `owned` range of the flat buffers (ParameterUpdate::owned_state; the optimizer must
// cover it) into its own shard file, as the pieces checkpoint_pieces names, by tensor name and
// global shape: a checkpoint written under any tensor/pipeline/data-parallel layout reads into any
// other. Rank 0 gathers the records, writes the manifest and prunes old checkpoints. All ranks
// return the same outcome.
Status save_training_checkpoint(Communicator& comm, const std::string& run_dir, const ModelConfig& cfg,
                                const ParamStore& store, AdamW& opt, FlatRange owned, const TrainingState& state,
                                int keep_last, const nlohmann::json& run_config);
// As above for a rank holding several model chunks (all written into its one shard file).
// write_fault (fault injection): this rank's shard write is cut short (fault_injection.h). With a
// `pruner`, rank 0 deletes the old checkpoints' files in the background (the save returns once
// they are no longer complete), else before it returns.
Status save_training_checkpoint(Communicator& comm, const std::string& run_dir, const ModelConfig& cfg,
                                const std::vector<CheckpointChunk>& chunks, const TrainingState& state,
                                int keep_last, const nlohmann::json& run_config, ShardWriteFault write_fault = {},
                                checkpoint::BackgroundPruner* pruner = nullptr);

// The pieces (parameters, AdamW m and v) this rank saves of its chunks, registered with `w`. With
// `snapshot`, they are copied there first and the writer reads the copy (an asynchronous save must
// not read buffers the next steps change); without, the writer reads the live buffers.
// extras_only: only the chunks' extra tensors are copied (they may change during the next
// forward/backward: compression residuals); the parameters and moments, which change only in the
// optimizer update, are read live -- the caller holds that update back until they are written.
Status add_checkpoint_pieces(checkpoint::CheckpointWriter& w, const std::vector<CheckpointChunk>& chunks,
                             std::vector<float>* snapshot, bool extras_only = false);
// The manifest's "state": step, loader position, AdamW step count and the resolved run config.
nlohmann::json training_state_json(const TrainingState& state, const nlohmann::json& run_config);

// Loads `checkpoint_dir` (a step_<n> directory) into store/opt after checking it was saved for the
// same model; returns the saved state. Any layout loads: each tensor-parallel piece of each tensor
// is read by global offset (the tied head copy of wte reads "wte"); vocabulary padding rows are
// set to 0 in parameters and moments. opt (may be null) receives the moments of the tensors in its
// range [begin, end). Never modifies the checkpoint.
Result<TrainingState> load_training_checkpoint(const std::string& checkpoint_dir, const ModelConfig& cfg,
                                               ParamStore& store, AdamW* opt);

}  // namespace tessera
