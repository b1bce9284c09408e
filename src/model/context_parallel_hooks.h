// The context-parallel seam of the transformer (parallel.cp = p > 1, parallel.cp_mode).
//
// The p ranks of a cp group hold the same parameters and the same sequences; each holds T/p positions
// of every sequence of the micro-batch and runs the embedding, norms, linears, MLP and loss on those
// positions only. Attention is the one op that mixes positions:
//
// ulysses: rank r holds positions [r*T/p, (r+1)*T/p). Around attention an all-to-all turns the
//   sequence split into a head split (DeepSpeed-Ulysses, Jacobs et al. 2023): rank r receives heads
//   [r*NH/p, (r+1)*NH/p) (and KV heads alike) over the whole sequence, applies RoPE and causal
//   attention to them exactly as one process would, and a second all-to-all brings the output back
//   to its own positions. Backward mirrors both exchanges. p must divide the sequence length, the
//   heads and the KV heads (after the tensor-parallel split).
// ring: rank r holds the two pieces r and 2p-1-r of length T/(2p) (data/loader.h SequenceChunk
//   balanced: all first pieces, then all second pieces), so every rank has the same causal work.
//   RoPE is applied at the pieces' true positions; the keys and values travel round the ring
//   (ring_start / ring_wait to rank r+1, from rank r-1) while the rank attends to the block in hand,
//   merging partial results by log-sum-exp; in backward the key/value gradients travel with them and
//   come home after a full turn (Liu et al. 2023, ring attention; Megatron-Core's load balance).
//   2p must divide the sequence length; there is no limit from the heads.
//
// Learned positions are indexed by each piece's first position. Each rank's loss is the mean over
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

enum class ContextParallelMode { ulysses, ring };

class ContextParallelHooks {
 public:
  virtual ~ContextParallelHooks() = default;
  virtual int cp_rank() const = 0;
  virtual int cp_size() const = 0;
  virtual ContextParallelMode mode() const = 0;
  // `send` holds cp_size() blocks of `block` floats, block s for rank s; `recv` receives block r
  // from rank r. The buffers do not overlap.
  virtual void all_to_all(const float* send, float* recv, int64_t block) = 0;
  // Ring: starts sending `count` floats of `send` to rank (r+1) % p and receiving as many from rank
  // (r+p-1) % p into `recv` on `channel` (0 or 1: two exchanges may be in flight at once);
  // ring_wait(channel) completes it. Neither buffer may be touched until then.
  virtual void ring_start(int channel, const float* send, float* recv, int64_t count) = 0;
  virtual void ring_wait(int channel) = 0;
  // Lets the exchanges in flight advance without waiting (between two blocks of attention): a
  // library that moves data only inside its calls then moves it while the peers still compute.
  virtual void ring_progress() = 0;
  // x (n int32, host-visible) = its sum over the cp group: a mixture-of-experts layer's routed counts,
  // which its load-balancing loss takes over the whole sequence.
  virtual void all_reduce_sum(int32_t* x, int64_t n) = 0;
  virtual Status status() const = 0;
};

}  // namespace tessera
