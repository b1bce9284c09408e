// Checking a load against the checkpoint's logical fingerprints (checkpoint/fingerprint.h): after
// every rank loaded its part, each fingerprints the ranges it owns -- the pieces a save of its
// chunks would write, which cover every tensor exactly once over all ranks -- and the partials are
// summed across ranks and compared with the fingerprints the saving layout recorded.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/format.h"
#include "comm/communicator.h"
#include "core/status.h"
#include "train/train_checkpoint.h"

namespace tessera {

// This rank's partial fingerprints of what `chunks` hold, over the pieces save_training_checkpoint
// would write of them (checkpoint_pieces of each owned range, and the extra tensors), by checkpoint
// key: "param/<name>", and "adam_m/<name>", "adam_v/<name>" for chunks with an optimizer. A key
// this rank holds none of, but knows, maps to 0.
std::map<std::string, uint64_t> partial_fingerprints(const std::vector<CheckpointChunk>& chunks);

// Compares `sums` (key -> fingerprint of the whole tensor as loaded) with the tensors `saved` in
// the manifest of `checkpoint_dir`. Keys without a saved fingerprint (a checkpoint from before
// fingerprints) or not in the manifest are skipped. corrupt_data naming every differing tensor.
// `checked` (may be null) receives the number of tensors compared.
Status compare_fingerprints(const std::string& checkpoint_dir, const std::vector<checkpoint::TensorEntry>& saved,
                            const std::map<std::string, uint64_t>& sums, int64_t* checked = nullptr);

// Collective over `comm`, after every rank loaded `checkpoint_dir` into its `chunks` (the chunks it
// would save: ParameterUpdate::owned_state). Sums every rank's partial_fingerprints and compares
// the totals with the manifest. Every rank returns the same outcome; ok with the number of tensors
// compared (0 for a checkpoint saved before fingerprints existed).
Result<int64_t> verify_loaded_fingerprints(Communicator& comm, const std::string& checkpoint_dir,
                                           const std::vector<CheckpointChunk>& chunks);

}  // namespace tessera
