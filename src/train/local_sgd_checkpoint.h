// Local SGD's state in training checkpoints, beside the model's keys: the outer state (anchor and
// outer momentum, identical on every replica: dp rank r writes the r-th 1/dp) and every replica's
// own parameters and AdamW moments (they differ between and, for the moments, across
// synchronisations: [dp, numel] tensors, row r written by dp rank r), so --resume continues exactly.
#pragma once
#include <string>
#include <vector>

#include "parallel/local_sgd.h"
#include "train/train_checkpoint.h"

namespace tessera {

// The keys' prefix for one model chunk: "local_sgd/" for a whole replica (tp = pp = 1), else
// "local_sgd/stage<s>.chunk<c>.tp<t>/" -- each chunk's flat buffer is its own tensor.
std::string local_sgd_key_prefix(bool whole_replica, int stage, int chunk, int tp_rank);

// The tensors this rank saves for one chunk; they point into `s`'s live buffers.
std::vector<ExtraTensor> local_sgd_checkpoint_tensors(LocalSgd& s, const std::string& prefix);

// --resume, after load_training_checkpoint restored the model's keys: loads this replica's state
// and the outer state into `s`. A checkpoint without them (saved by synchronous training) leaves
// local SGD to start from the loaded parameters. The per-replica state does not reshard: a
// checkpoint saved with another number of replicas is refused, naming the one it needs.
Status restore_local_sgd_state(const std::string& checkpoint_dir, LocalSgd& s, const std::string& prefix);

}  // namespace tessera
