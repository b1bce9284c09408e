// ModelParallelSync: the gradient strategy of a rank in a dp x tp x pp layout (or with ZeRO). The
// rank holds one or more model chunks (a pipeline stage's layer range, or V of them under the
// interleaved schedule), each a tensor-parallel shard in its own ParamStore. Per chunk, a
// ReplicaSync (DataParallel, or ZeroSharded) combines the gradients over the dp group, overlapped
// with the backward pass, and runs AdamW over what it owns. On top of that:
//   - tied embeddings split over pipeline stages: the first stage's wte and the last stage's copy
//     (the head) each hold part of the gradient; their sum is all-reduced over the "embedding
//     group" (first and last stage of one (dp, tp) position), so both apply the same update (under
//     ZeRO on each rank's slice of it: ReplicaSync::sum_grad_over);
//   - sequence parallelism: replicated tensors' gradients are partial sums over each tp rank's
//     rows, summed over the tp group;
//   - the gradient norm sums each element of the whole model once: sharded tensors on every tp
//     rank, replicated ones on tp rank 0, the tied copy on the first stage only, over tp then pp
//     (gathered as doubles and added in rank order, so every rank clips by the same bits).
// Every training run uses it, dp x 1 x 1 included: a rank of one chunk with tp = pp = 1 has nothing
// to correct, and its update is the part's own (DataParallel and LocalSgd clip by the norm of the
// whole flat buffer), so such runs keep the bits they had with the part as the whole strategy.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "model/param_layout.h"
#include "parallel/replica_sync.h"
#include "parallel/gradient_sync.h"

namespace tessera {

struct ModelParallelGroups {
  Communicator* dp = nullptr;
  Communicator* tp = nullptr;
  Communicator* pp = nullptr;
  // First and last pipeline stage of this (dp, tp) position, when embeddings are tied and pp > 1
  // and this rank is one of them; nullptr otherwise.
  Communicator* embedding = nullptr;
  bool sequence_parallel = false;
};

class ModelParallelSync final : public GradientSync {
 public:
  // Makes the data-parallel part of one chunk (DataParallel, or ZeroSharded for parallel.zero > 0).
  using MakeReplicaSync = std::function<std::unique_ptr<ReplicaSync>(ParamStore& chunk)>;
  // chunks: this rank's stores in chunk order; every pointer and communicator outlives this object.
  ModelParallelSync(Backend& backend, ModelParallelGroups groups, std::vector<ParamStore*> chunks,
                    const MakeReplicaSync& make);

  std::string_view name() const override { return "model_parallel"; }
  Status broadcast_parameters() override;
  void begin_micro_batch(bool completes_step) override;
  // A no-op: layer numbers are per chunk, so each chunk's models call chunk_sync(c) directly.
  void on_layer_ready(int) override {}
  Status finish() override;
  // The norm over every chunk and the tp / pp groups (see above), each chunk's owned step, then
  // each chunk's complete_update.
  Result<UpdateResult> update(float lr, float max_norm, Timeline& timeline) override;
  Status average_over_replicas(float* values, int64_t n) override;
  Status verify_replicas(std::string_view what) override;
  std::vector<OwnedState> owned_state() override;
  void discard_gradients() override {
    for (Part& p : parts_) p.dp->discard_gradients();
  }
  std::vector<GradSpan> reduced_gradients() override {
    std::vector<GradSpan> out;
    for (Part& p : parts_)
      for (const GradSpan& g : p.dp->reduced_gradients()) out.push_back(g);
    return out;
  }
  int64_t optimizer_steps() const override { return parts_.front().dp->optimizer_steps(); }
  double exposed_wait_s() const override;
  void set_trace(TraceFn fn) override;

  // The data-parallel part of chunk c: its models' grad-ready and layer callbacks go here.
  ReplicaSync& chunk_sync(int chunk) { return *parts_.at(chunk).dp; }

  // Sum of squares of the whole model's gradient, each element counted once (see above).
  Result<double> grad_sum_of_squares();

 private:
  struct Part {
    ParamStore* store;
    std::unique_ptr<ReplicaSync> dp;
  };
  Status sum_tied_embedding_grads();
  Backend& backend_;
  ModelParallelGroups g_;
  std::vector<Part> parts_;
};

// Whether `p` is the last pipeline stage's copy of the tied embedding (its gradient and update
// mirror the first stage's wte, which checkpoints and norms count instead).
bool is_tied_embedding_copy(const ParamLayout& layout, const ParamInfo& p);

}  // namespace tessera
