// Megatron-style tensor parallelism over the grid's tp communicator: the Transformer's
// TensorParallelHooks implemented with all-reduce (or, with sequence parallelism, all-gather and
// reduce-scatter along rows), the tp-aware gradient norm for clipping, and the sum of the replicated
// tensors' partial gradients that sequence parallelism needs.
//
// The math (model/tensor_parallel_hooks.h has the full derivation), p ranks, rank r:
//   column-parallel Y = XA, A = [A_1 ... A_p]: Y_r = X A_r; copy_to_region: fwd X, bwd dX = sum_r dX_r
//   row-parallel    Y = XA, A = [A_1; ...; A_p], X = [X_1 ... X_p]: Y = sum_r X_r A_r (reduce_from_region
//                   fwd all-reduce SUM, bwd identity); the replicated bias is added once (rank 0)
//   vocab-parallel embedding: sum_r of the masked lookups (reduce_from_region)
//   vocab-parallel cross-entropy: row max (all-reduce MAX), [sum exp, target logit] (all-reduce SUM)
// Sequence parallelism (TensorParallel(tp, true)), N = B*T rows, rank r owns rows [r*N/p, (r+1)*N/p)
// of the norms and residual stream:
//   copy_to_region:     fwd all-gather X's row shards, bwd reduce-scatter dX = sum_r dX_r
//   reduce_from_region: fwd reduce-scatter Y = sum_r Y_r (each rank keeps its rows), bwd all-gather dY
// The same bytes move as with the all-reduce (an all-reduce is a reduce-scatter + all-gather), but
// the norms, residual adds and their saved activations shrink to N/p rows; backward all-gathers each
// column-parallel input once more (transformer.h). Replicated tensors' gradients become partial
// (norm weights: over the rank's rows; wpe and row-parallel biases: on tp rank 0 only, the rank that
// adds them in forward): call sequence_parallel_reduce_replicated_grads after the step's last
// backward, before tp_clip_grad_norm and the optimizer.
//
// Usage (every rank of a tp group, same seed):
//   ParamStore store{ParamLayout(cfg, TensorParallelShard{grid.tp().rank(), grid.tp().size()})};
//   init_parameters(store, cfg, seed);                     // this shard of the whole model's values
//   Transformer net(backend, cfg, store, B, T);
//   TensorParallel tp(grid.tp(), sequence_parallel);       // SP: first validate_sequence_parallel(B*T, p)
//   net.set_tensor_parallel_hooks(&tp);
//   float loss = net.forward(tokens, targets); net.backward();
//   TS_RETURN_IF_ERROR(tp.status());                       // a failed/timed-out collective, if any
//   if (sequence_parallel) TS_RETURN_IF_ERROR(sequence_parallel_reduce_replicated_grads(backend, store, grid.tp()));
//   auto norm = tp_clip_grad_norm(backend, store, grid.tp(), max_norm);   // before the optimizer step
// Every tp rank feeds the same tokens; the loss (and every replicated tensor's gradient; under
// sequence parallelism after sequence_parallel_reduce_replicated_grads) comes out identical on all of
// them, each sharded tensor's gradient is that shard of the whole gradient.
#pragma once
#include "backend/backend.h"
#include "comm/communicator.h"
#include "core/memory.h"
#include "core/status.h"
#include "model/param_layout.h"
#include "model/tensor_parallel_hooks.h"

namespace tessera {

class TensorParallel final : public TensorParallelHooks {
 public:
  // `tp` (e.g. grid.tp()) must outlive this object. sequence_parallel: see above (needs every
  // region's rows divisible by tp.size(); the Transformer checks B*T when the hooks are set).
  // The copies of its exchange run as ops of `backend` (the model's).
  TensorParallel(Backend& backend, Communicator& tp, bool sequence_parallel = false)
      : backend_(backend), comm_(tp), sp_(sequence_parallel) {}

  int tp_rank() const override { return comm_.rank(); }
  int tp_size() const override { return comm_.size(); }
  bool sequence_parallel() const override { return sp_; }
  void copy_to_region_forward(const TpRegion& x) override {
    if (sp_) all_gather_rows(x, "copy_to_region forward");
  }
  void copy_to_region_backward(const TpRegion& dx) override {
    if (sp_) reduce_scatter_rows(dx, "copy_to_region backward");
    else all_reduce(dx, ReduceOp::sum, "copy_to_region backward");
  }
  void reduce_from_region_forward(const TpRegion& y) override {
    if (sp_) reduce_scatter_rows(y, "reduce_from_region forward");
    else all_reduce(y, ReduceOp::sum, "reduce_from_region forward");
  }
  void reduce_from_region_backward(const TpRegion& dy) override {
    if (sp_) all_gather_rows(dy, "reduce_from_region backward");
  }
  void sequence_gather(const TpRegion& x) override { all_gather_rows(x, "sequence_gather"); }
  void cross_entropy_max(const TpRegion& m) override { all_reduce(m, ReduceOp::max, "cross_entropy_max"); }
  void cross_entropy_sum(const TpRegion& s) override { all_reduce(s, ReduceOp::sum, "cross_entropy_sum"); }

  // The first failure (comm_error / timeout naming the op, its sequence number and the ranks that did
  // not arrive); later hooks skip their communication. Check after every forward and backward: after
  // a timeout the communicator is unusable and the job must end (abort_job).
  Status status() const override { return status_; }

 private:
  // In place, async + wait: unlike a blocking call it times out (CommOptions::timeout_s) if a peer hangs.
  void all_reduce(const TpRegion& r, ReduceOp op, const char* hook);
  // Along rows, in place: rank r's rows [r*rows/p, (r+1)*rows/p) go to every rank / receive the sum.
  void all_gather_rows(const TpRegion& r, const char* hook);
  void reduce_scatter_rows(const TpRegion& r, const char* hook);
  bool rows_divide(const TpRegion& r, const char* hook);  // records an error when they do not
  void fail(const Status& s, const TpRegion& r, const char* hook);
  Backend& backend_;
  Communicator& comm_;
  bool sp_;
  Status status_;
  // The reduce-scatter's result before it moves to this rank's rows: a separate receive buffer,
  // because backends disagree on where an in-place reduce-scatter puts it (MPI: at the start, NCCL:
  // at the rank's block). Grows to the largest region once.
  Buffer scatter_;
};

// Under sequence parallelism, turns every replicated tensor's (TpSplit::replicated: norm weights
// and biases, wpe, row-parallel biases) per-rank partial gradient into the whole gradient: the sum
// over `tp`, in place, identical on every tp rank (one all-reduce over the packed tensors). Call it
// once per step after the last micro-batch's backward (the sum is linear, so accumulated
// micro-batches are summed together; it commutes with the data-parallel average) and before
// tp_clip_grad_norm / the optimizer. Without sequence parallelism those gradients are already whole:
// do not call it (it would multiply them by the tp size). Collective over `tp`; no-op at size 1.
Status sequence_parallel_reduce_replicated_grads(Backend& backend, ParamStore& store, Communicator& tp);

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
Result<float> tp_clip_grad_norm(Backend& backend, ParamStore& store, Communicator& tp, float max_norm);

}  // namespace tessera
