// ZeRO stages 1-3 over a dp group: units, owned slices, overlapped reductions and gathers.
#include "parallel/zero.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <chrono>
#include <string>

#include "comm/agreement.h"
#include "core/log.h"

namespace tessera {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

StoreOptions zero_store_options(int stage) {
  StoreOptions o;
  if (stage >= 2) o.grads = Residency::paged;
  if (stage >= 3) o.params = Residency::paged;
  return o;
}

struct ZeroSharded::Unit {
  int layer = 0;
  int64_t begin = 0, end = 0;  // flat range, a multiple of dp elements long
  int64_t slice = 0;           // (end - begin) / dp
  FlatRange owned;             // this rank's slice
  std::unique_ptr<AdamW> opt;  // over `owned`
  float* acc = nullptr;        // stages 2, 3: reduced gradient of the owned slice, summed over micro-batches
  float* recv = nullptr;       // while reducing (stages 2, 3): the receive slot
  size_t index = 0;            // in units_, for the trace
  Work reduction;
  bool reducing = false;
  bool launched = false;  // stage 1: reduced (or reducing) this step
  double t_launch = 0;
  Work gather;  // stage 3
  bool gathering = false, gathered = true;
};

ZeroSharded::ZeroSharded(Backend& backend, Communicator& dp, ParamStore& store, const AdamWConfig& optim, int stage,
                         bool bf16_grads, ShardedExperts experts)
    : backend_(backend), replicas_(dp), dp_(experts.enabled() ? *experts.replicas : dp), experts_(experts),
      store_(store), stage_(stage), bf16_grads_(bf16_grads), rank_(dp_.rank()), size_(dp_.size()) {
  TS_CHECK(stage >= 1 && stage <= 3) << "ZeRO stage " << stage;
  TS_CHECK(experts.enabled() == store.layout().experts_sharded() && (!experts.enabled() || experts.ep))
      << "ZeRO: the expert groups must be given exactly when the layout stores only some experts";
  const ParamLayout& layout = store.layout();
  if (experts.enabled()) {
    expert_ranges_ = expert_ranges(layout);
    dense_ranges_ = dense_ranges(layout);
  }
  // Units: the layers present, in buffer order.
  std::vector<int> layers;
  for (const ParamInfo& p : layout.params())
    if (layers.empty() || layers.back() != p.layer) layers.push_back(p.layer);
  int64_t acc_floats = 0, max_slice = 0;
  for (int layer : layers) {
    auto u = std::make_unique<Unit>();
    u->layer = layer;
    std::tie(u->begin, u->end) = layout.layer_range(layer);
    TS_CHECK((u->end - u->begin) % (16 * size_) == 0)
        << "ZeRO over " << size_ << " ranks needs ParamLayout layer_alignment " << zero_layer_alignment(size_)
        << "; layer " << layer << " spans " << u->end - u->begin << " elements";
    u->slice = (u->end - u->begin) / size_;
    u->owned = {u->begin + rank_ * u->slice, u->begin + (rank_ + 1) * u->slice};
    u->opt = std::make_unique<AdamW>(layout, optim, u->owned.begin, u->owned.end, &backend);
    u->index = units_.size();
    acc_floats += stage_ >= 2 ? u->slice : 0;
    max_slice = std::max(max_slice, u->slice);
    units_.push_back(std::move(u));
  }
  accumulators_ = backend.allocate(static_cast<size_t>(acc_floats) * sizeof(float), MemCategory::gradients);
  float* cursor = accumulators_.as<float>();
  for (auto& u : units_)
    if (stage_ >= 2) {
      u->acc = cursor;
      cursor += u->slice;
    }
  slots_ = backend.allocate(static_cast<size_t>(2 * max_slice) * sizeof(float), MemCategory::communication);
  for (int i = 0; i < 2; ++i) free_recv_.push_back(slots_.as<float>() + i * max_slice);
  // A tied head on the stage that also holds the embedding reads wte (unit -1) at layer n_layer.
  const ParamInfo* wte = layout.find("wte");
  tied_head_ = wte && wte->layer == -1 && layout.find("lnf.w") && !layout.find("lm_head.w");
}

ZeroSharded::~ZeroSharded() = default;

void ZeroSharded::record(const Status& s) {
  if (!s.ok() && status_.ok()) status_ = s;
}

ZeroSharded::Unit* ZeroSharded::unit_of(int layer) {
  for (auto& u : units_)
    if (u->layer == layer) return u.get();
  return nullptr;
}

void ZeroSharded::sample() {
  store_.grad_buffer().sample_residency();
  store_.param_buffer().sample_residency();
}

// ---- parameters ----

Status ZeroSharded::broadcast_parameters() {
  if (experts_.enabled()) TS_RETURN_IF_ERROR(broadcast_with_sharded_experts(replicas_, experts_, store_));
  else TS_RETURN_IF_ERROR(dp_.broadcast(store_.params(), store_.numel(), DType::f32, 0));
  if (stage_ >= 3)
    for (auto& u : units_) release_params(*u);
  sample();
  return Status::ok_status();
}

// A free receive slot, completing the oldest reduction in flight when both are taken.
float* ZeroSharded::take_recv_slot() {
  if (free_recv_.empty()) record(complete_reduction(*reducing_.front()));
  float* slot = free_recv_.back();
  free_recv_.pop_back();
  return slot;
}

Status ZeroSharded::finish_gather(Unit& u) {
  const Status s = u.gather.wait();
  u.gathering = false;
  u.gathered = true;
  gathering_.erase(std::find(gathering_.begin(), gathering_.end(), &u));
  if (!s.ok()) return Status(s.code(), "ZeRO gather of layer " + std::to_string(u.layer) + ": " + s.message());
  return s;
}

void ZeroSharded::start_gather(Unit& u) {
  if (u.gathered || u.gathering) return;
  // In place: the owned slice is this rank's block of the unit (MPI_IN_PLACE; NCCL's in-place form).
  // At most two gathers in flight, as with the reductions.
  if (gathering_.size() >= 2) record(finish_gather(*gathering_.front()));
  u.gather = dp_.all_gather_async(store_.params() + u.owned.begin, store_.params() + u.begin, u.slice, DType::f32);
  u.gathering = true;
  gathering_.push_back(&u);
}

Status ZeroSharded::ensure_gathered(Unit& u) {
  if (u.gathered) return Status::ok_status();
  start_gather(u);
  TS_RETURN_IF_ERROR(finish_gather(u));
  sample();
  return Status::ok_status();
}

void ZeroSharded::release_params(Unit& u) {
  if (stage_ < 3 || size_ == 1 || u.gathering) return;
  Buffer& b = store_.param_buffer();
  b.discard_range(static_cast<size_t>(u.begin) * sizeof(float),
                  static_cast<size_t>(u.owned.begin - u.begin) * sizeof(float));
  b.discard_range(static_cast<size_t>(u.owned.end) * sizeof(float),
                  static_cast<size_t>(u.end - u.owned.end) * sizeof(float));
  u.gathered = false;
}

void ZeroSharded::on_layer_event(Transformer::LayerEvent event, int layer) {
  if (stage_ < 3 || size_ == 1) return;
  Unit* u = unit_of(layer);
  if (!u) return;
  Unit* emb = tied_head_ && layer == units_.back()->layer ? unit_of(-1) : nullptr;
  if (event == Transformer::LayerEvent::after_forward) {
    release_params(*u);
    if (emb) release_params(*emb);
    return;
  }
  // before_forward / before_backward: this unit now, the next one in the pass's direction prefetched.
  // The embedding's backward reads no parameters (it only scatters into dwte, dwpe).
  const bool forward = event == Transformer::LayerEvent::before_forward;
  if (!forward && layer == -1) return;
  record(ensure_gathered(*u));
  if (emb) record(ensure_gathered(*emb));
  const size_t i = u->index;
  if (forward && i + 1 < units_.size()) start_gather(*units_[i + 1]);
  if (!forward && i > 0 && units_[i - 1]->layer != -1) start_gather(*units_[i - 1]);
}

Status ZeroSharded::all_gather_units() {
  for (auto& u : units_) {
    u->gathered = false;
    start_gather(*u);
  }
  while (!gathering_.empty()) record(finish_gather(*gathering_.front()));
  return status_;
}

Status ZeroSharded::complete_update() {
  TS_RETURN_IF_ERROR(status_);
  if (size_ == 1) return Status::ok_status();
  if (stage_ >= 3) {  // the owned slices changed: every unit is fetched again where it is next read
    while (!gathering_.empty()) record(finish_gather(*gathering_.front()));
    for (auto& u : units_) release_params(*u);
    sample();
    return status_;
  }
  const Status s = all_gather_units();
  if (!s.ok()) return Status(s.code(), "ZeRO parameter all-gather: " + s.message());
  return s;
}

// ---- gradients ----

void ZeroSharded::begin_micro_batch(bool completes_step) {
  if (stage_ == 1) {
    sync_ = completes_step;
    return;
  }
  // Stages 2, 3 reduce every micro-batch; the next backward writes these gradients again.
  while (!reducing_.empty()) record(complete_reduction(*reducing_.front()));
}

void ZeroSharded::launch_reduction(Unit& u) {
  float* g = store_.grads() + u.begin;
  u.recv = take_recv_slot();
  u.t_launch = now_s();
  u.reducing = true;
  u.launched = true;
  reducing_.push_back(&u);
  if (bf16_grads_) {  // in place, front to back: element i's 2 bytes land where elements <= i were read
    auto* h = reinterpret_cast<uint16_t*>(g);
    backend_.cast_f32_to_bf16(h, g, u.end - u.begin);
    u.reduction = dp_.reduce_scatter_async(h, u.recv, u.slice, DType::bf16, ReduceOp::avg);
    return;
  }
  u.reduction = dp_.reduce_scatter_async(g, u.recv, u.slice, DType::f32, ReduceOp::avg);
}

Status ZeroSharded::complete_reduction(Unit& u) {
  const Status s = u.reduction.wait();
  u.reducing = false;
  reducing_.erase(std::find(reducing_.begin(), reducing_.end(), &u));
  if (trace_) trace_(u.index, u.t_launch, now_s());
  free_recv_.push_back(u.recv);
  if (!s.ok()) return Status(s.code(), "ZeRO gradient reduction of layer " + std::to_string(u.layer) + ": " + s.message());
  if (bf16_grads_) {  // the slot's first half holds the bf16 slice: widen it in place, back to front
    backend_.cast_bf16_to_f32(u.recv, reinterpret_cast<const uint16_t*>(u.recv), u.slice);
    if (stage_ == 1)  // the rest of the unit holds bf16 bits: zero it, so the flat gradient stays finite
      backend_.fill(store_.grads() + u.begin, u.end - u.begin, 0.0f);
  }
  if (stage_ == 1) {  // the step's only reduction: the owned slice of the flat gradient holds the average
    backend_.copy(store_.grads() + u.owned.begin, u.recv, u.slice);
  } else {
    backend_.add(u.acc, u.acc, u.recv, u.slice);
    store_.grad_buffer().zero_range(static_cast<size_t>(u.begin) * sizeof(float),
                                    static_cast<size_t>(u.end - u.begin) * sizeof(float));
  }
  return s;
}

void ZeroSharded::poll() {  // MPI progresses non-blocking collectives only inside MPI calls
  while (!reducing_.empty() && reducing_.front()->reduction.test()) record(complete_reduction(*reducing_.front()));
  while (!gathering_.empty() && gathering_.front()->gather.test()) record(finish_gather(*gathering_.front()));
}

void ZeroSharded::on_layer_ready(int layer) {
  Unit* u = unit_of(layer);
  if (!u) return;
  if (stage_ >= 2) sample();  // the gradient pages of this micro-batch are at their peak here
  poll();
  if ((stage_ == 1 && sync_ && size_ > 1) || stage_ >= 2) launch_reduction(*u);
  if (stage_ >= 3) {  // the layer's backward is done with its parameters (a tied head with wte too)
    release_params(*u);
    if (tied_head_ && layer == units_.back()->layer) release_params(*unit_of(-1));
  }
}

Status ZeroSharded::finish() {
  const double t0 = now_s();
  for (auto& u : units_)
    if (stage_ == 1 && !u->launched && size_ > 1) launch_reduction(*u);  // its layer never came up in sync
  while (!reducing_.empty()) record(complete_reduction(*reducing_.front()));
  for (auto& u : units_) u->launched = false;
  if (experts_.enabled() && status_.ok()) record(average_over_expert_parallel());
  exposed_wait_s_ += now_s() - t0;
  sample();
  return status_;
}

float* ZeroSharded::owned_grads(Unit& u) { return stage_ >= 2 ? u.acc - u.owned.begin : store_.grads(); }

Status ZeroSharded::average_over_expert_parallel() {
  const float inv_ep = 1.f / static_cast<float>(experts_.ep->size());
  for (auto& u : units_) {
    float* g = owned_grads(*u);
    for (const auto& [b, e] : expert_ranges_) {
      const int64_t lo = std::max(b, u->owned.begin), hi = std::min(e, u->owned.end);
      if (lo < hi) backend_.scale_inplace(g + lo, hi - lo, inv_ep);
    }
    for (const auto& [b, e] : dense_ranges_) {
      const int64_t lo = std::max(b, u->owned.begin), hi = std::min(e, u->owned.end);
      if (lo >= hi) continue;
      const Status s = experts_.ep->all_reduce_async(g + lo, g + lo, hi - lo, DType::f32, ReduceOp::avg).wait();
      if (!s.ok()) return Status(s.code(), "ZeRO dense gradient average over the ep group: " + s.message());
    }
  }
  return Status::ok_status();
}

Result<double> ZeroSharded::grad_sum_of_squares(const CountedTensor& counted) {
  // Sharded experts: the ep ranks hold the same dense slices (counted on ep rank 0) and different experts.
  const bool dense_here = !experts_.enabled() || experts_.ep->rank() == 0;
  double local = 0;
  for (auto& u : units_) {
    const float* g = owned_grads(*u);
    for (const ParamInfo& p : store_.layout().params()) {
      if (p.layer != u->layer || !counted(p) || (!p.expert && !dense_here)) continue;
      const int64_t b = std::max(p.offset, u->owned.begin), e = std::min(p.offset + p.numel, u->owned.end);
      if (b < e) local += backend_.sum_of_squares(g + b, e - b);
    }
  }
  TS_ASSIGN_OR_RETURN(const double over_dp, ordered_sum(dp_, local, "ZeRO gradient norm over the dp group"));
  if (!experts_.enabled()) return over_dp;
  return ordered_sum(*experts_.ep, over_dp, "ZeRO gradient norm over the ep group");
}

void ZeroSharded::scale_grads(float scale) {
  for (auto& u : units_) {
    float* g = stage_ >= 2 ? u->acc : store_.grads() + u->owned.begin;
    backend_.scale_inplace(g, u->slice, scale);
  }
}

Status ZeroSharded::sum_grad_over(Communicator& group, const ParamInfo& p) {
  TS_RETURN_IF_ERROR(status_);
  Unit* u = unit_of(p.layer);
  TS_CHECK(u && p.offset >= u->begin && p.offset + p.numel <= u->end) << "tensor " << p.name << " outside its unit";
  float* owned = stage_ >= 2 ? u->acc : store_.grads() + u->owned.begin;
  const int64_t n = u->end - u->begin;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  Buffer whole_unit(bytes, MemCategory::communication);
  float* whole = whole_unit.as<float>();
  if (size_ == 1) backend_.copy(whole, owned, n);
  else TS_RETURN_IF_ERROR(dp_.all_gather_async(owned, whole, u->slice, DType::f32).wait());
  float* g = whole + (p.offset - u->begin);
  TS_RETURN_IF_ERROR(group.all_reduce_async(g, g, p.numel, DType::f32, ReduceOp::sum).wait());
  backend_.copy(owned, whole + (u->owned.begin - u->begin), u->slice);
  return Status::ok_status();
}

Result<float> ZeroSharded::clip_own_grad_norm(float max_norm) { return clip_by_global_norm(*this, max_norm); }

void ZeroSharded::step_owned(float lr) {
  for (auto& u : units_) {
    if (stage_ == 1) {
      u->opt->step(store_.params(), store_.grads(), lr);
      continue;
    }
    u->opt->step_with_range_grads(store_.params(), u->acc, lr);
    backend_.fill(u->acc, u->slice, 0.0f);  // the next step accumulates anew
  }
}

void ZeroSharded::discard_gradients() {
  if (stage_ < 2) return;
  for (auto& u : units_) backend_.fill(u->acc, u->slice, 0.0f);
}

std::vector<GradSpan> ZeroSharded::reduced_gradients() {
  std::vector<GradSpan> out;
  if (stage_ >= 2)
    for (auto& u : units_) out.push_back({u->acc, u->slice});
  return out;
}

// ---- the rest ----

Status ZeroSharded::average_over_replicas(float* values, int64_t n) {
  if (replicas_.size() == 1) return Status::ok_status();
  return replicas_.all_reduce_async(values, values, n, DType::f32, ReduceOp::avg).wait();
}

Status ZeroSharded::verify_replicas(std::string_view what) {
  if (stage_ >= 3 && size_ > 1) {  // only the owned slices are resident: gather, compare, page out again
    TS_RETURN_IF_ERROR(all_gather_units());
  }
  const Status s = verify_replica_parameters(replicas_, experts_, store_, what);
  if (stage_ >= 3)
    for (auto& u : units_) release_params(*u);
  return s;
}

int64_t ZeroSharded::optimizer_steps() const { return units_.front()->opt->steps_taken(); }

std::vector<OwnedState> ZeroSharded::owned_state() {
  std::vector<OwnedState> out;
  for (auto& u : units_) out.push_back({0, u->opt.get(), u->owned});
  return out;
}

}  // namespace tessera
