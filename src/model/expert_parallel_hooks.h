// The expert-parallel seam of the transformer's mixture-of-experts layers (parallel.ep = p > 1).
//
// The p ranks of an ep group read different data, like data-parallel ranks, and hold the same dense
// parameters. Each stores only its own experts (ParamLayout's ExpertShard: experts
// [r*E/p, (r+1)*E/p) of every MoE layer, at local index e - r*E/p); ZeRO shards them over dp.
// Rank r computes experts [r*E/p, (r+1)*E/p) of every MoE layer for the tokens all p ranks routed
// there:
//   1. each rank routes its own tokens (router, top-k, capacity: exactly as one process routes that
//      micro-batch) and gathers the dispatched rows grouped by expert, so the rows for rank d's
//      experts are one contiguous block;
//   2. exchange_counts tells every rank how many rows of each of its experts come from each rank;
//   3. exchange_rows (all-to-all with variable counts) sends each block to its experts' owner;
//   4. the owner runs its experts over each source's rows, and a second exchange_rows returns the
//      outputs, which the source combines with its router weights.
// The rows a rank routes to its own experts need no exchange: it computes them while the others'
// rows travel (start_rows ... progress_rows between matmuls ... finish_rows), in forward and backward.
// Backward mirrors 3 and 4: the output gradients go to the owner, which accumulates its experts'
// weight gradients over every source and sends the input gradients home. The owner's expert
// gradients are then averaged over the ranks storing the same experts (dp) and divided by p
// (parallel/data_parallel.h), the dense ones averaged over Grid::param_replicas() (dp x ep): every
// rank gets the one-process gradient of what it stores. (With every expert stored, a non-owner's
// expert gradient stays zero and the plain average over dp x ep is the same thing.)
//
// The communicating implementation is parallel/expert_parallel.h (ExpertParallel). Errors as in
// tensor_parallel_hooks.h: the first failure is recorded, later exchanges are skipped, status()
// reports it and the caller checks Transformer::ep_status() after each forward and backward.
#pragma once
#include <cstdint>

#include "core/status.h"

namespace tessera {

class ExpertParallelHooks {
 public:
  virtual ~ExpertParallelHooks() = default;
  virtual int ep_rank() const = 0;
  virtual int ep_size() const = 0;
  // Every rank sends n int32 to each rank (block d of `send` to rank d); block s of `recv` comes from
  // rank s. Host memory.
  virtual void exchange_counts(const int32_t* send, int32_t* recv, int64_t n) = 0;
  // send_rows[d] rows of `width` floats to rank d (send holds the blocks in rank order); recv gets
  // recv_rows[s] rows from rank s, in rank order. The buffers do not overlap.
  void exchange_rows(const float* send, const int64_t* send_rows, float* recv, const int64_t* recv_rows,
                     int64_t width) {
    start_rows(send, send_rows, recv, recv_rows, width);
    finish_rows();
  }
  // exchange_rows in parts, so the rank computes while the rows travel: start_rows posts it,
  // progress_rows lets it advance (MPI moves data only inside its calls), finish_rows waits for it.
  // The buffers and row counts stay untouched until finish_rows; one exchange at a time.
  virtual void start_rows(const float* send, const int64_t* send_rows, float* recv, const int64_t* recv_rows,
                          int64_t width) = 0;
  virtual void progress_rows() = 0;
  virtual void finish_rows() = 0;
  virtual Status status() const = 0;
};

}  // namespace tessera
