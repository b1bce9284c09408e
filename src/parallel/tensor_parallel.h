// Megatron-style tensor parallelism over the grid's tp communicator: the Transformer's
// TensorParallelHooks implemented with all-reduce, and the tp-aware gradient norm for clipping.
//
// The math (model/tensor_parallel_hooks.h has the full derivation), p ranks, rank r:
//   column-parallel Y = XA, A = [A_1 ... A_p]: Y_r = X A_r; copy_to_region: fwd X, bwd dX = sum_r dX_r
//   row-parallel    Y = XA, A = [A_1; ...; A_p], X = [X_1 ... X_p]: Y = sum_r X_r A_r (reduce_from_region
//                   fwd all-reduce SUM, bwd identity); the replicated bias is added once (rank 0)
//   vocab-parallel embedding: sum_r of the masked lookups (reduce_from_region)
//   vocab-parallel cross-entropy: row max (all-reduce MAX), [sum exp, target logit] (all-reduce SUM)
//
// Usage (every rank of a tp group, same seed):
//   ParamStore store{ParamLayout(cfg, TensorParallelShard{grid.tp().rank(), grid.tp().size()})};
//   init_parameters(store, cfg, seed);                     // this shard of the whole model's values
//   Transformer net(cfg, store, B, T);
//   TensorParallel tp(grid.tp());
//   net.set_tensor_parallel_hooks(&tp);
//   float loss = net.forward(tokens, targets); net.backward();
//   TS_RETURN_IF_ERROR(tp.status());                       // a failed/timed-out all-reduce, if any
//   auto norm = tp_clip_grad_norm(store, grid.tp(), max_norm);   // before the optimizer step
// Every tp rank feeds the same tokens; the loss (and every replicated tensor's gradient) comes out
// identical on all of them, each sharded tensor's gradient is that shard of the whole gradient.
#pragma once
#include "comm/communicator.h"
#include "core/status.h"
#include "model/param_layout.h"
#include "model/tensor_parallel_hooks.h"

namespace tessera {

class TensorParallel final : public TensorParallelHooks {
 public:
  // `tp` (e.g. grid.tp()) must outlive this object.
  explicit TensorParallel(Communicator& tp) : comm_(tp) {}

  int tp_rank() const override { return comm_.rank(); }
  int tp_size() const override { return comm_.size(); }
  void copy_to_region_forward(const TpRegion&) override {}
  void copy_to_region_backward(const TpRegion& dx) override { all_reduce(dx, ReduceOp::sum, "copy_to_region backward"); }
  void reduce_from_region_forward(const TpRegion& y) override { all_reduce(y, ReduceOp::sum, "reduce_from_region forward"); }
  void reduce_from_region_backward(const TpRegion&) override {}
  void cross_entropy_max(const TpRegion& m) override { all_reduce(m, ReduceOp::max, "cross_entropy_max"); }
  void cross_entropy_sum(const TpRegion& s) override { all_reduce(s, ReduceOp::sum, "cross_entropy_sum"); }

  // The first failure (comm_error / timeout naming the op, its sequence number and the ranks that did
  // not arrive); later hooks skip their communication. Check after every forward and backward: after
  // a timeout the communicator is unusable and the job must end (abort_job).
  Status status() const override { return status_; }

 private:
  // In place, async + wait: unlike a blocking call it times out (CommOptions::timeout_s) if a peer hangs.
  void all_reduce(const TpRegion& r, ReduceOp op, const char* hook);
  Communicator& comm_;
  Status status_;
};

// Squared L2 norm of the whole model's gradient, from the tp shards: sum over tensors of the local
// sum of squares, where split tensors (column / row / vocab) contribute on every tp rank (their
// shards are disjoint pieces; vocabulary padding rows have zero gradient) and replicated tensors
// (norms, wpe, row-parallel biases: identical gradients on every rank) only on tp rank 0. The
// per-rank partial sums are all-gathered in double and added in rank order, so every tp rank gets
// the same bits. Equals the single-process sum of squares up to rounding. Collective over `tp`.
// Under pipeline parallelism add the results of the pp stages (disjoint tensors); dp replicas
// already hold the same averaged gradient, so nothing is added over dp (ZeRO: add over the shards).
Result<double> tp_grad_sum_of_squares(const ParamStore& store, Communicator& tp);

// clip_grad_norm (optim/adamw.h) over a tp group: norm = sqrt(tp_grad_sum_of_squares); when
// max_norm > 0 and norm > max_norm, scales every local gradient by max_norm / (norm + 1e-6).
// Returns the norm before clipping (the same on every tp rank).
Result<float> tp_clip_grad_norm(ParamStore& store, Communicator& tp, float max_norm);

}  // namespace tessera
