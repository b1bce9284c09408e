// Data parallelism: every dp rank holds a full replica; gradients are packed into buckets that are
// all-reduced (averaged) asynchronously as soon as the backward pass has made them final, so the
// communication overlaps the rest of the backward pass. The first GradientSync strategy: every
// rank owns every gradient and runs AdamW over the whole model.
//
// With comm.compression (CompressedExchange, parallel/compression_sync.h) the buckets are compressed
// and exchanged through it (bf16 / top-k / 1-bit per bucket, PowerSGD over the whole buffer in
// finish()); the tied embedding then stays in the buckets, so it is compressed too.
//
// A tied embedding (wte read by the head too) is left out of the buckets: TiedEmbeddingTail
// reduces the head's part as soon as the head is done and the embedding's rows sparsely at the end.
//
// Owner-only expert storage (ParamLayout::experts_sharded, expert parallelism): a rank
// stores only its ep rank's experts, which the model trained on every ep rank's tokens, so their
// gradients are averaged over the ranks storing the same experts (ShardedExperts::replicas, the dp
// group) and divided by the ep size -- the one-process mean over dp x ep data ranks -- while the
// dense tensors are averaged over the whole replica group as usual. Buckets never mix the two.
//
// Buckets are contiguous ranges of the flat gradient buffer. Gradients become final layer by layer
// from the end of the buffer towards its start (head, layer L-1, ..., layer 0, embeddings), so the
// buckets are cut from the end backwards and each launches once the lowest layer it touches is ready.
//
// The average without a pass of its own: plain buckets (and the tied-embedding tail) are summed, and
// the 1/dp joins the clipping factor in a scale the optimizer step applies as it reads each gradient
// (grad_scale_; the norm accounts for it). On bench-small dp 2 the divide over the 56 MB gradient
// and the clip's scaling pass were 5.5 + 3.7 ms of a ~270 ms step. Compressed and sharded-expert
// exchanges still average in place (their scales differ per bucket).
//
// Progress: MPI's non-blocking collectives advance only inside MPI calls, so every layer callback
// test()s the buckets in flight. Measured (bench/dp_overlap.sh, bench-small, 2 ranks x 1 thread,
// 8 x 512 tokens): a bucket launched at one layer completes at the next callback; ~16 ms/step of
// communication work runs inside the callbacks and ~5-30 ms/step is left to finish() (mostly the
// tied embedding, final only at the very end) in a ~3.8 s step. A dedicated communication thread
// with blocking MPI_Allreduce was not adopted: with one core per rank it would compete with the
// compute thread (Open MPI busy-polls while waiting), it needs MPI_THREAD_MULTIPLE, and blocking
// calls cannot time out, losing the "rank k never arrived" diagnosis of a hung peer.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "model/param_layout.h"
#include "optim/adamw.h"
#include "parallel/compression_sync.h"
#include "parallel/gradient_sync.h"
#include "parallel/replica_sync.h"
#include "parallel/tied_embedding_tail.h"

namespace tessera {

class DataParallel final : public ReplicaSync {
 public:
  // dp: the data-parallel group; bucket_bytes: target size of one all-reduce (the last bucket may
  // be smaller). AdamW (with `optim`) covers the whole flat buffer. compression: how the gradients
  // travel (none = f32 all-reduce).
  // The strategy's own loops run as ops of `backend` (the model's).
  // experts: set (both groups) iff store.layout().experts_sharded(); compression must then be none.
  DataParallel(Backend& backend, Communicator& dp, ParamStore& store, const AdamWConfig& optim, int64_t bucket_bytes,
                const CompressionConfig& compression = {}, ShardedExperts experts = {});

  std::string_view name() const override { return "data_parallel"; }
  // Copies rank 0's parameters to every rank (start of a run); sharded experts from rank 0 of their replicas.
  Status broadcast_parameters() override;
  void begin_micro_batch(bool completes_step) override { sync_ = completes_step; }
  // Launches every bucket that has become final.
  void on_layer_ready(int layer) override;
  // Waits for every bucket (launching any not yet launched). Afterwards grads x grad_scale() hold the dp
  // average.
  Status finish() override;
  void step_owned(float lr) override;
  Status complete_update() override { return Status::ok_status(); }  // replicas updated themselves
  Status average_over_replicas(float* values, int64_t n) override;
  // Hashes the whole parameter buffer and compares across the dp group (with sharded experts: the
  // dense tensors across it, the whole buffer across the experts' replicas).
  Status verify_replicas(std::string_view what) override;
  // Replicas are identical, so the dp ranks split the writing: rank r saves the r-th 1/dp of the buffer
  // (with sharded experts: 1/dp of the experts' replicas, and checkpoint_pieces leaves the dense
  // tensors to ep rank 0).
  std::vector<OwnedState> owned_state() override { return {{0, &opt_, checkpoint_range()}}; }
  int64_t optimizer_steps() const override { return opt_.steps_taken(); }
  FlatRange checkpoint_range() const;
  // comm.compression's exchange and its state between steps (null: none, or dp = 1).
  CompressedExchange* exchange() { return exchange_.get(); }
  // Replicas hold the whole averaged gradient: the local sum over the counted tensors, no communication
  // (with sharded experts, the experts' part is summed over the ep group).
  Result<double> grad_sum_of_squares(const CountedTensor& counted) override;
  void scale_grads(float scale) override;
  // Adds p's gradient over `group` as it lies in the buffer: every member must hold it at the same
  // grad_scale() (the same strategy over dp groups of one size, as pipeline stages and tp ranks do).
  Status sum_grad_over(Communicator& group, const ParamInfo& p) override;
  // What the gradient buffer must be multiplied by to be the final gradient: 1/dp after a summed
  // exchange, times the clipping factor; 1 again after the optimizer step.
  float grad_scale() const { return grad_scale_; }

  double exposed_wait_s() const override { return exposed_wait_s_; }
  void set_trace(TraceFn fn) override { trace_ = std::move(fn); }
  size_t num_buckets() const { return buckets_.size(); }

 protected:
  // Every replica holds the whole averaged gradient: the norm needs no communication.
  Result<float> clip_own_grad_norm(float max_norm) override;

 private:
  struct Bucket {
    int64_t begin, end;  // element range in the flat buffer
    int lowest_layer;    // the bucket is final once this layer is
    bool experts;        // sharded experts' gradients only (averaged over experts_.replicas)
    Work work;
    bool launched = false;
    double t_launch = 0;
    double t_done = 0;  // when a test() or wait() first saw it complete (0: not yet)
  };
  void launch(Bucket& b);
  // Plain f32 buckets are summed and the 1/dp left to grad_scale_ (not with compression or sharded experts).
  bool sums_instead_of_averaging() const { return !exchange_ && !experts_.enabled(); }
  Backend& backend_;
  Communicator& dp_;
  ParamStore& store_;
  AdamW opt_;
  std::unique_ptr<TiedEmbeddingTail> tail_;  // tied head on this stage: dwte reduced in two parts
  std::vector<Bucket> buckets_;  // in launch order (end of the buffer first)
  std::unique_ptr<CompressedExchange> exchange_;  // comm.compression != none and dp > 1
  ShardedExperts experts_;
  bool sync_ = true;
  float grad_scale_ = 1.f;
  double exposed_wait_s_ = 0;
  TraceFn trace_;
};

}  // namespace tessera
