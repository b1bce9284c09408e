// The context-parallel seam of the transformer (parallel.cp = p > 1, parallel.cp_mode = "ulysses").
//
// The p ranks of a cp group hold the same parameters and the same sequences; rank r holds positions
// [r*T/p, (r+1)*T/p) of every sequence of the micro-batch and runs the embedding, norms, linears,
// MLP and loss on those positions only. Attention is the one op that mixes positions, so around it
// an all-to-all turns the sequence split into a head split (DeepSpeed-Ulysses, Jacobs et al. 2023):
// rank r receives heads [r*NH/p, (r+1)*NH/p) (and KV heads alike) over the whole sequence, applies
// RoPE and causal attention to them exactly as one process would, and a second all-to-all brings
// the output back to its own positions. Backward mirrors both exchanges. p must divide the sequence
// length, the heads and the KV heads (after the tensor-parallel split).
//
// Learned positions are indexed from the rank's first position. Each rank's loss is the mean over
// its positions; with every target valid, the mean over the cp group of those losses and of their
// gradients is the whole sequence's, which is what the data-parallel exchange over dp x cp computes
// (Grid::param_replicas()).
//
// The communicating implementation is parallel/context_parallel.h (ContextParallel). Errors as in
// tensor_parallel_hooks.h: the first failure is recorded, later exchanges are skipped, status()
// reports it and the caller checks Transformer::cp_status() after each forward and backward.
#pragma once
#include <cstdint>

#include "core/status.h"

namespace tessera {

class ContextParallelHooks {
 public:
  virtual ~ContextParallelHooks() = default;
  virtual int cp_rank() const = 0;
  virtual int cp_size() const = 0;
  // `send` holds cp_size() blocks of `block` floats, block s for rank s; `recv` receives block r
  // from rank r. The buffers do not overlap.
  virtual void all_to_all(const float* send, float* recv, int64_t block) = 0;
  virtual Status status() const = 0;
};

}  // namespace tessera
