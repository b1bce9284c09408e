// Local updates (Local SGD / DiLoCo): every data-parallel replica takes H inner steps with its own
// AdamW on its own gradients -- no gradient all-reduce -- and then the replicas average their
// parameter deltas (anchor - params, the "outer gradient") in one all-reduce and apply the average
// with an outer SGD optimizer (momentum, optionally Nesterov) to the anchor, the parameters at the
// last synchronisation, which every replica then continues from.
//
// Outer lr 1 and momentum 0 is plain model averaging. With H = 1 this equals synchronous data
// parallelism exactly when the inner update is linear in the gradient (SGD); AdamW's is not (each
// replica normalises its own gradient), so H = 1 with AdamW is close to, not equal to, data parallelism.
//
// Inner AdamW moments stay per replica (as DiLoCo keeps them); the replicas hold different
// parameters between synchronisations and identical anchors and outer momenta always.
//
// A replica may itself span ranks (tp > 1, pp > 1): ModelParallelSync holds one LocalSgd per model
// chunk, whose dp group is that chunk's replicas, and adds the tp / pp corrections (norm over the
// replica's ranks, tied-embedding and sequence-parallel sums) on the local gradients.
#pragma once
#include <cstdint>

#include "comm/communicator.h"
#include "core/memory.h"
#include "model/param_layout.h"
#include "optim/adamw.h"
#include "parallel/replica_sync.h"

namespace tessera {

struct LocalSgdConfig {
  int64_t local_steps = 1;  // H: inner steps between synchronisations
  float outer_lr = 1.0f;
  float outer_momentum = 0.0f;
  bool nesterov = false;
};

// One outer SGD step over n elements (torch.optim.SGD's rule, on the outer gradient `delta`):
//   v = momentum * v + delta;  anchor -= lr * (nesterov ? delta + momentum * v : v)
void outer_sgd_step(Backend& backend, float* anchor, float* velocity, const float* delta, int64_t n,
                    const LocalSgdConfig& cfg);

class LocalSgd final : public ReplicaSync {
 public:
  // dp: the replicas; AdamW (with `optim`) covers the whole flat buffer of `store`.
  LocalSgd(Backend& backend, Communicator& dp, ParamStore& store, const AdamWConfig& optim, const LocalSgdConfig& cfg);

  std::string_view name() const override { return "local_sgd"; }
  // Fresh run: copies rank 0's parameters to every replica; the anchor starts there, the outer
  // momentum at 0. After restore_replica_state: checks the replicas' anchors agree instead.
  Status broadcast_parameters() override;
  void begin_micro_batch(bool) override {}
  void on_layer_ready(int) override {}
  Status finish() override { return Status::ok_status(); }  // inner steps: the local gradient
  // This replica's own gradient (no communication over dp).
  Result<double> grad_sum_of_squares(const CountedTensor& counted) override;
  void scale_grads(float scale) override;
  Status sum_grad_over(Communicator& group, const ParamInfo& p) override;
  // The inner step.
  void step_owned(float lr) override;
  // After every H-th inner step (counted in AdamW steps, so a resumed run keeps its rhythm): the
  // outer step -- averages the deltas over the replicas, updates the anchor, sets params = anchor.
  Status complete_update() override;
  Status average_over_replicas(float* values, int64_t n) override;
  // Anchors and outer momenta are always identical over the replicas; parameters right after a
  // synchronisation too.
  Status verify_replicas(std::string_view what) override;
  // The standard checkpoint keys: rank r writes the r-th 1/dp of its own parameters and moments
  // (exact at a synchronisation for the parameters); the per-replica state is saved beside them.
  std::vector<OwnedState> owned_state() override { return {{0, &opt_, checkpoint_range()}}; }
  int64_t optimizer_steps() const override { return opt_.steps_taken(); }
  FlatRange checkpoint_range() const;

  double exposed_wait_s() const override { return exposed_wait_s_; }
  void set_trace(TraceFn fn) override { trace_ = std::move(fn); }

  // For checkpoints (train/local_sgd_checkpoint.h): the outer state and this replica's inner state.
  const LocalSgdConfig& config() const { return cfg_; }
  Communicator& dp() { return dp_; }
  ParamStore& store() { return store_; }
  AdamW& inner_optimizer() { return opt_; }
  float* anchor() { return anchor_.as<float>(); }
  float* outer_momentum() { return momentum_.as<float>(); }
  // The state was restored from a checkpoint: broadcast_parameters must not overwrite it.
  void mark_restored() {
    restored_ = true;
    synced_ = opt_.steps_taken() % cfg_.local_steps == 0;
  }
  // Whether the step just taken ended a round (its update took the outer step).
  bool synced_last_step() const { return synced_; }

 protected:
  // Norm of this replica's own gradient (no communication).
  Result<float> clip_own_grad_norm(float max_norm) override;

 private:
  Backend& backend_;
  Communicator& dp_;
  ParamStore& store_;
  AdamW opt_;
  LocalSgdConfig cfg_;
  Buffer anchor_, momentum_;  // (numel) each; the averaged delta uses the gradient buffer (free after the update)
  bool restored_ = false, synced_ = true;
  double exposed_wait_s_ = 0;
  TraceFn trace_;
};

}  // namespace tessera
