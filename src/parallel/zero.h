// ZeRO (Rajbhandari et al., 2020) over a dp group: the replicas of one model chunk split the
// optimizer state (stage 1), also the gradients (stage 2), also the parameters (stage 3).
//
// Shards. The chunk's flat buffer is cut into units, one per layer (embeddings = -1, final norm and
// head = n_layer), each a multiple of 16 * dp elements long (ParamLayout's layer_alignment, see
// zero_layer_alignment), so unit u splits into dp equal slices and rank r owns slice r of every
// unit: [u.begin + r*s, u.begin + (r+1)*s). Its AdamW moments, its reduced gradient (stages 2, 3)
// and, at stage 3, its parameters are all this rank keeps between uses.
//
// Per step:
//   stage 1: a unit's gradient is reduce-scattered (averaged) as soon as its layer is final (last
//            micro-batch only; earlier ones accumulate locally, as DataParallel) and the owned slice
//            copied back into the flat gradient; AdamW updates the owned slices; then every unit is
//            all-gathered from the owners (the same traffic as one all-reduce).
//   stage 2: every micro-batch reduce-scatters each unit as soon as its layer is final into a
//            receive slice, adds it to the owned gradient accumulator and zeroes the unit's
//            full-size gradient (a paged buffer hands the pages back), so at most the units in
//            flight hold full-size gradients. AdamW runs on the accumulator; parameters are
//            all-gathered as in stage 1.
//   stage 3: as stage 2, and the parameters outside the owned slices are paged out. The models
//            report where they read parameters (Transformer::LayerEvent): before a layer's forward
//            or backward its unit is all-gathered (the next layer's gather is started at the same
//            time, so it overlaps the compute), after its forward (and after its backward) the
//            pages of the other ranks' slices are handed back. A tied head reads the embedding unit.
// Resident bytes of the paged buffers are sampled (mincore) after each gather and reduction, so
// the memory counters (and metrics) show the real footprint.
//
// Owner-only experts (ShardedExperts; expert parallelism): the ep ranks store different experts at
// the same offsets, so ZeRO shards every unit over the experts' replicas (dp) only. After the step's
// reductions the owned slices' dense parts are averaged over the ep group too (the one-process mean
// over dp x ep data ranks) and their expert parts divided by ep, as in DataParallel.
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "model/param_layout.h"
#include "optim/adamw.h"
#include "parallel/replica_sync.h"

namespace tessera {

// The ParamLayout layer_alignment a ZeRO store over `dp` ranks needs.
inline int64_t zero_layer_alignment(int dp) { return 16 * static_cast<int64_t>(dp); }
// How a ZeRO store allocates: paged gradients from stage 2, paged parameters at stage 3.
StoreOptions zero_store_options(int stage);

class ZeroSharded final : public ReplicaSync {
 public:
  // stage 1..3. The store's layout must have layer_alignment a multiple of zero_layer_alignment(dp.size())
  // and its buffers zero_store_options(stage). `dp` and `store` outlive this object.
  // bf16_grads (comm.compression = "bf16"): each unit's gradient is cast to bf16 in place (the flat
  // buffer's unit is dead after its reduction) and reduce-scattered in bf16: half the bytes.
  // experts: set iff store.layout().experts_sharded(); `dp` is then the whole replica group (dp x ep,
  // for average_over_replicas and the dense check) and the shards are over experts.replicas.
  ZeroSharded(Backend& backend, Communicator& dp, ParamStore& store, const AdamWConfig& optim, int stage,
              bool bf16_grads = false, ShardedExperts experts = {});
  ~ZeroSharded() override;

  std::string_view name() const override { return "zero"; }
  Status broadcast_parameters() override;
  void begin_micro_batch(bool completes_step) override;
  void on_layer_ready(int layer) override;
  Status finish() override;
  void step_owned(float lr) override;
  void discard_gradients() override;
  std::vector<GradSpan> reduced_gradients() override;
  // The owned slices changed: stages 1-2 all-gather them, stage 3 releases every unit to be fetched
  // again where it is next read.
  Status complete_update() override;
  Status average_over_replicas(float* values, int64_t n) override;
  Status verify_replicas(std::string_view what) override;
  std::vector<OwnedState> owned_state() override;
  int64_t optimizer_steps() const override;
  double exposed_wait_s() const override { return exposed_wait_s_; }
  void set_trace(TraceFn fn) override { trace_ = std::move(fn); }

  Result<double> grad_sum_of_squares(const CountedTensor& counted) override;
  void scale_grads(float scale) override;
  // The owned slices of p are spread over the dp group and cut differently in another chunk's
  // layout: the unit's reduced gradient is gathered whole (a transient buffer of the unit's size,
  // freed on return: ZeRO-3 keeps no whole unit between steps), p's part summed over `group`, and
  // the owned slice taken back.
  Status sum_grad_over(Communicator& group, const ParamInfo& p) override;
  void on_layer_event(Transformer::LayerEvent event, int layer) override;

  int stage() const { return stage_; }
  // The first communication failure inside a layer callback (callbacks cannot return one); finish()
  // and complete_update() report it.
  Status status() const { return status_; }

 protected:
  Result<float> clip_own_grad_norm(float max_norm) override;

 private:
  struct Unit;
  Unit* unit_of(int layer);
  void launch_reduction(Unit& u);
  Status complete_reduction(Unit& u);
  void poll();
  void start_gather(Unit& u);
  Status finish_gather(Unit& u);
  Status ensure_gathered(Unit& u);
  void release_params(Unit& u);
  Status all_gather_units();
  float* take_recv_slot();
  void sample();
  void record(const Status& s);
  // Sharded experts, after the step's reductions: the owned dense gradient averaged over ep, the
  // owned expert gradient divided by ep.
  Status average_over_expert_parallel();
  // The owned reduced gradient of unit u, indexed by flat offset (valid in [owned.begin, owned.end)).
  float* owned_grads(Unit& u);

  Backend& backend_;
  Communicator& replicas_;  // every replica of the chunk's dense tensors
  Communicator& dp_;        // the ranks that shard each unit (replicas_ unless experts are sharded)
  ShardedExperts experts_;
  std::vector<std::pair<int64_t, int64_t>> expert_ranges_, dense_ranges_;  // sharded experts only
  ParamStore& store_;
  int stage_;
  bool bf16_grads_;
  int rank_, size_;
  std::vector<std::unique_ptr<Unit>> units_;  // in buffer order (embeddings first)
  Buffer accumulators_;                       // stages 2, 3: every unit's owned gradient slice
  // Two receive slices for reduce-scatters (each the largest unit's slice): at most two are in flight,
  // the oldest is completed to free a slot. All-gathers need none: they run in place.
  Buffer slots_;
  std::vector<float*> free_recv_;
  std::vector<Unit*> reducing_, gathering_;  // in launch order
  bool sync_ = true;
  bool tied_head_ = false;  // the head reads the embedding unit's wte
  double exposed_wait_s_ = 0;
  TraceFn trace_;
  Status status_;
};

}  // namespace tessera
