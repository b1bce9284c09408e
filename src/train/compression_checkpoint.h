// Gradient compression's state between steps in training checkpoints: each replica's error-feedback
// residual and PowerSGD warm-start Q (parallel/compression_sync.h), or a parameter-server worker's
// push residuals. They differ between replicas, so
// they are [dp, n] tensors, row r written by dp rank r, under "compression/<chunk>/<name>"; a resume
// with the same dp continues bitwise. They do not reshard: with another dp, or from a checkpoint
// without them, the state restarts at zero / the seed and rank 0 says so.
#pragma once
#include <string>
#include <vector>

#include "checkpoint/reader.h"
#include "parallel/compression_sync.h"
#include "train/train_checkpoint.h"

namespace tessera {

// "compression/" for a whole replica (tp = pp = 1), else "compression/stage<s>.chunk<c>.tp<t>/".
std::string compression_key_prefix(bool whole_replica, int stage, int chunk, int tp_rank);

// The tensors this rank saves for one chunk; they point into the live state.
std::vector<ExtraTensor> compression_checkpoint_tensors(const std::vector<CompressionState>& state, int dp_rank,
                                                        int dp_size, const std::string& prefix);

// --resume: loads this replica's row of each state tensor. Returns "" when restored, else why not
// (nothing saved, another dp, another compression): the state then stays at its start.
Result<std::string> restore_compression_state(const checkpoint::CheckpointReader& reader,
                                              const std::vector<CompressionState>& state, int dp_rank, int dp_size,
                                              const std::string& prefix);

}  // namespace tessera
