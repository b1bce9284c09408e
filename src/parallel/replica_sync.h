// ReplicaSync: the data-parallel half of a model chunk's gradient strategy -- how the replicas of
// one chunk (the ranks of a dp group) combine gradients and split the optimizer: DataParallel (full
// replicas, all-reduce), ZeroSharded (ZeRO stages 1-3) or LocalSgd (local updates). A ReplicaSync
// is a whole GradientSync for a rank holding one chunk of a dp-only layout; ModelParallelSync
// composes one per chunk with the tensor/pipeline-parallel corrections, through the parts of the
// update below (norm, scale, the owned optimizer step, what completes the update).
#pragma once
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "model/param_layout.h"
#include "model/transformer.h"
#include "parallel/gradient_sync.h"

namespace tessera {

// The groups of owner-only expert storage (ParamLayout::experts_sharded): `replicas` holds the ranks
// storing this rank's experts (dp), `ep` the ranks storing the other experts. Both null: every rank
// stores every expert.
struct ShardedExperts {
  Communicator* replicas = nullptr;
  Communicator* ep = nullptr;
  bool enabled() const { return replicas != nullptr; }
};

// The dense tensors' element ranges of `layout` (between its sharded experts' ranges, merged): the
// whole buffer unless experts_sharded().
std::vector<std::pair<int64_t, int64_t>> dense_ranges(const ParamLayout& layout);

// Sharded experts: rank 0 of the experts' replicas gives its whole buffer to them, then rank 0 of
// `replicas` (dp x ep) its dense tensors to every replica.
Status broadcast_with_sharded_experts(Communicator& replicas, const ShardedExperts& experts, ParamStore& store);
// That the replicas hold the same parameters: the whole buffer over `replicas`, or with sharded
// experts the dense tensors over `replicas` and the whole buffer over the experts' replicas.
// Collective; every rank returns the same outcome, naming the ranks that differ.
Status verify_replica_parameters(Communicator& replicas, const ShardedExperts& experts, const ParamStore& store,
                                 std::string_view what);

// Whether a tensor's gradient counts towards the global norm on this rank (tp rank 0 only for
// replicated tensors, never the last stage's tied copy, ...).
using CountedTensor = std::function<bool(const ParamInfo&)>;

// Sum of one double from every rank of `comm`, added in rank order so every rank gets the same
// bits (MPI has no such guarantee for a floating-point all-reduce). `what` prefixes a failure.
Result<double> ordered_sum(Communicator& comm, double local, const char* what);

// For strategies whose ranks hold the whole gradient of their chunk (DataParallel, LocalSgd): the
// counted tensors' sum of squares on this rank, and tensor p's gradient summed over `group` in place.
double full_grad_sum_of_squares(Backend& backend, const ParamStore& store, const CountedTensor& counted);
Status sum_full_grad_over(Communicator& group, ParamStore& store, const ParamInfo& p);

// Clips `sync`'s final gradient to `max_norm` by its global norm (grad_sum_of_squares over every
// tensor, then scale_grads by max_norm / (norm + 1e-6), clip_grad_norm's rule); returns the norm
// before clipping. For strategies whose norm needs communication (ZeRO, sharded experts).
class ReplicaSync;
Result<float> clip_by_global_norm(ReplicaSync& sync, float max_norm);

// An update's two timed parts: clip_and_step (returns the norm before clipping) drawn as
// "optimizer", then complete (the parameter exchange) as "parameter sync wait".
Result<UpdateResult> timed_update(Timeline& timeline, const std::function<Result<float>()>& clip_and_step,
                                  const std::function<Status()>& complete);

class ReplicaSync : public GradientSync {
 public:
  // The whole update of this chunk alone: clip_own_grad_norm, step_owned, complete_update.
  Result<UpdateResult> update(float lr, float max_norm, Timeline& timeline) final;

  // The parts of the update, for ModelParallelSync's composition over chunks.
  // After finish(): the sum of squares of the final gradient over the counted tensors, each element
  // counted once over the dp group (the same value on every dp rank).
  virtual Result<double> grad_sum_of_squares(const CountedTensor& counted) = 0;
  // Multiplies the final gradient this rank holds by `scale` (clipping).
  virtual void scale_grads(float scale) = 0;
  // The optimizer step of the state this rank owns.
  virtual void step_owned(float lr) = 0;
  // After step_owned: what completes the update of this chunk over the dp group (ZeRO: parameters
  // updated by other ranks become visible here; local SGD: every H-th step, the outer step).
  virtual Status complete_update() = 0;

  // The chunk's models report where they read parameters (ZeRO-3 gathers them there).
  virtual void on_layer_event(Transformer::LayerEvent, int /*layer*/) {}
  // After finish(): adds tensor p's final gradient on every rank of `group` (the same tensor held by
  // another chunk, e.g. a tied embedding on the first and last pipeline stage) into the part of it
  // this rank keeps. Both sides of `group` must reduce the same tensor at the same point.
  virtual Status sum_grad_over(Communicator& group, const ParamInfo& p) = 0;

 protected:
  // This chunk alone: the global norm of its gradient before clipping, after clipping it.
  virtual Result<float> clip_own_grad_norm(float max_norm) = 0;
};

}  // namespace tessera
