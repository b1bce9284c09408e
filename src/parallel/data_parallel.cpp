// Gradient buckets and their overlapped all-reduce.
#include "parallel/data_parallel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "comm/agreement.h"
#include "core/log.h"

namespace tessera {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

DataParallel::DataParallel(Backend& backend, Communicator& dp, ParamStore& store, const AdamWConfig& optim,
                           int64_t bucket_bytes, const CompressionConfig& compression, ShardedExperts experts)
    : backend_(backend), dp_(dp), store_(store), opt_(store.layout(), optim, 0, -1, &backend),
      tail_(compression.kind == CompressionKind::none
                ? TiedEmbeddingTail::create(backend, dp, store, experts.enabled() ? ReduceOp::avg : ReduceOp::sum)
                : nullptr),
      experts_(experts) {
  TS_CHECK(experts.enabled() == store.layout().experts_sharded() && (!experts.enabled() || experts.ep))
      << "DataParallel: the expert groups must be given exactly when the layout stores only some experts";
  TS_CHECK(!experts.enabled() || compression.kind == CompressionKind::none)
      << "DataParallel: compression with sharded experts";
  if (compression.kind != CompressionKind::none && dp.size() > 1)
    exchange_ = std::make_unique<CompressedExchange>(backend, dp, store.layout(), compression);
  const ParamLayout& layout = store.layout();
  const int64_t start = tail_ ? tail_->end() : 0;  // the tail reduces wte itself
  const int64_t per_bucket = std::max<int64_t>(16, bucket_bytes / static_cast<int64_t>(sizeof(float)));
  // Walk tensors from the end of the buffer (ready first) to the start.
  const auto& params = layout.params();
  int64_t end = layout.total_numel();
  int64_t cursor = end;
  int lowest = INT32_MAX;
  bool experts_open = false;  // whether the open bucket holds sharded experts
  auto close = [&] {
    buckets_.push_back({cursor, end, lowest, experts_open, Work(), false, 0, 0});
    end = cursor;
    lowest = INT32_MAX;
  };
  for (auto it = params.rbegin(); it != params.rend() && it->offset >= start; ++it) {
    const bool expert = experts.enabled() && it->expert;
    if (expert != experts_open && end > cursor) close();  // a bucket is all experts or all dense
    experts_open = expert;
    int64_t t_begin = it->offset;
    while (cursor > t_begin) {
      const int64_t take = std::min(cursor - t_begin, per_bucket - (end - cursor));
      cursor -= take;
      lowest = std::min(lowest, it->layer);
      if (end - cursor >= per_bucket) close();
    }
    cursor = t_begin;  // skip alignment padding (inside the buffer, never read)
  }
  if (end > cursor || lowest != INT32_MAX) close();
  // Padding between tensors lies inside bucket ranges; it is zero on every rank, so averaging it is harmless.
}

Status DataParallel::broadcast_parameters() {
  if (!experts_.enabled()) return dp_.broadcast(store_.params(), store_.numel(), DType::f32, 0);
  return broadcast_with_sharded_experts(dp_, experts_, store_);
}

void DataParallel::launch(Bucket& b) {
  b.launched = true;
  b.t_launch = now_s();
  b.t_done = 0;
  if (exchange_) {
    b.work = exchange_->launch(static_cast<size_t>(&b - buckets_.data()), store_.grads(), b.begin, b.end);
    return;
  }
  float* g = store_.grads() + b.begin;
  Communicator& group = b.experts ? *experts_.replicas : dp_;
  b.work = group.all_reduce_async(g, g, b.end - b.begin, DType::f32,
                                  sums_instead_of_averaging() ? ReduceOp::sum : ReduceOp::avg);
}

void DataParallel::on_layer_ready(int layer) {
  if (!sync_ || dp_.size() == 1 || (exchange_ && !exchange_->per_bucket())) return;
  if (tail_ && layer == tail_->head_layer()) tail_->on_head_ready();
  // MPI progresses non-blocking collectives only inside MPI calls: poke the ones in flight.
  for (Bucket& b : buckets_)
    if (b.launched && b.t_done == 0 && b.work.test()) b.t_done = now_s();
  for (Bucket& b : buckets_) {
    if (b.launched) continue;
    if (b.lowest_layer < layer) break;  // buckets launch in order; later ones need earlier layers
    launch(b);
  }
}

Status DataParallel::finish() {
  grad_scale_ = 1.f;
  if (dp_.size() == 1) return Status::ok_status();
  if (sums_instead_of_averaging()) grad_scale_ = 1.f / static_cast<float>(dp_.size());
  const double t0 = now_s();
  if (exchange_ && !exchange_->per_bucket()) {  // PowerSGD: the whole buffer, after the backward
    const Status s = exchange_->exchange_all(store_.grads());
    if (trace_) trace_(0, t0, now_s());
    exposed_wait_s_ += now_s() - t0;
    return s;
  }
  Status first_error;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    if (!b.launched) launch(b);
    Status s = b.work.wait();
    if (b.t_done == 0) b.t_done = now_s();
    if (trace_) trace_(i, b.t_launch, b.t_done);
    if (!s.ok() && first_error.ok()) first_error = s;
    if (exchange_ && s.ok()) exchange_->complete(i, store_.grads(), b.begin, b.end);
    if (b.experts && s.ok())  // averaged over dp; the mean over dp x ep data ranks divides by ep too
      backend_.scale_inplace(store_.grads() + b.begin, b.end - b.begin, 1.f / static_cast<float>(experts_.ep->size()));
    b.launched = false;
  }
  if (tail_ && first_error.ok()) first_error = tail_->finish();
  exposed_wait_s_ += now_s() - t0;
  return first_error;
}

Result<double> DataParallel::grad_sum_of_squares(const CountedTensor& counted) {
  const double s = grad_scale_;
  if (!experts_.enabled()) return full_grad_sum_of_squares(backend_, store_, counted) * s * s;
  // The ep ranks hold the same dense tensors and different experts.
  const double dense = full_grad_sum_of_squares(backend_, store_, [&](const ParamInfo& p) { return !p.expert && counted(p); });
  const double experts = full_grad_sum_of_squares(backend_, store_, [&](const ParamInfo& p) { return p.expert && counted(p); });
  TS_ASSIGN_OR_RETURN(const double all_experts, ordered_sum(*experts_.ep, experts, "expert gradient norm over the ep group"));
  return dense + all_experts;
}

void DataParallel::scale_grads(float scale) { grad_scale_ *= scale; }

Status DataParallel::sum_grad_over(Communicator& group, const ParamInfo& p) {
  return sum_full_grad_over(group, store_, p);
}

Result<float> DataParallel::clip_own_grad_norm(float max_norm) {
  if (experts_.enabled()) return clip_by_global_norm(*this, max_norm);  // the experts' part is over the ep group
  // One pass over the whole buffer, as clip_grad_norm; the scale joins grad_scale_ instead of a pass.
  const double s = grad_scale_;
  const double norm = std::sqrt(backend_.sum_of_squares(store_.grads(), store_.numel()) * s * s);
  if (max_norm > 0 && norm > max_norm) scale_grads(static_cast<float>(max_norm / (norm + 1e-6)));
  return static_cast<float>(norm);
}

void DataParallel::step_owned(float lr) {
  opt_.step(store_.params(), store_.grads(), lr, grad_scale_);
  grad_scale_ = 1.f;
}

Status DataParallel::average_over_replicas(float* values, int64_t n) {
  if (dp_.size() == 1) return Status::ok_status();
  // Async + wait: unlike a blocking call it times out if a rank never arrives.
  return dp_.all_reduce_async(values, values, n, DType::f32, ReduceOp::avg).wait();
}

Status DataParallel::verify_replicas(std::string_view what) {
  return verify_replica_parameters(dp_, experts_, store_, what);
}

FlatRange DataParallel::checkpoint_range() const {
  const Communicator& writers = experts_.enabled() ? *experts_.replicas : dp_;
  const int64_t n = store_.numel(), r = writers.rank(), p = writers.size();
  return {n * r / p, n * (r + 1) / p};
}

}  // namespace tessera
