// Local SGD / DiLoCo: inner steps without communication, delta averaging and the outer step.
#include "parallel/local_sgd.h"

#include <chrono>

#include "comm/agreement.h"

namespace tessera {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
size_t flat_bytes(const ParamStore& s) { return static_cast<size_t>(s.numel()) * sizeof(float); }
}  // namespace

void outer_sgd_step(Backend& backend, float* anchor, float* velocity, const float* delta, int64_t n,
                    const LocalSgdConfig& cfg) {
  backend.outer_sgd_update(anchor, velocity, delta, n, cfg.outer_lr, cfg.outer_momentum, cfg.nesterov);
}

LocalSgd::LocalSgd(Backend& backend, Communicator& dp, ParamStore& store, const AdamWConfig& optim,
                   const LocalSgdConfig& cfg)
    : backend_(backend), dp_(dp), store_(store), opt_(store.layout(), optim, 0, -1, &backend), cfg_(cfg),
      anchor_(backend.allocate(flat_bytes(store), MemCategory::optimizer_state)),
      momentum_(backend.allocate(flat_bytes(store), MemCategory::optimizer_state)) {
  backend_.copy(anchor(), store_.params(), store_.numel());
  backend_.fill(outer_momentum(), store_.numel(), 0.0f);
}

Status LocalSgd::broadcast_parameters() {
  if (restored_) return verify_replicas("local SGD anchor after resume");
  TS_RETURN_IF_ERROR(dp_.broadcast(store_.params(), store_.numel(), DType::f32, 0));
  backend_.copy(anchor(), store_.params(), store_.numel());
  backend_.fill(outer_momentum(), store_.numel(), 0.0f);
  return Status::ok_status();
}

Result<float> LocalSgd::clip_own_grad_norm(float max_norm) {
  return tessera::clip_grad_norm(backend_, store_.grads(), store_.numel(), max_norm);
}

Result<double> LocalSgd::grad_sum_of_squares(const CountedTensor& counted) {
  return full_grad_sum_of_squares(backend_, store_, counted);
}

void LocalSgd::scale_grads(float scale) { backend_.scale_inplace(store_.grads(), store_.numel(), scale); }

Status LocalSgd::sum_grad_over(Communicator& group, const ParamInfo& p) {
  return sum_full_grad_over(group, store_, p);
}

void LocalSgd::step_owned(float lr) { opt_.step(store_.params(), store_.grads(), lr); }

Status LocalSgd::complete_update() {
  synced_ = opt_.steps_taken() % cfg_.local_steps == 0;
  if (!synced_) return Status::ok_status();
  const int64_t n = store_.numel();
  float* params = store_.params();
  float* delta = store_.grads();  // free until the next step zeroes it
  backend_.sub(delta, anchor(), params, n);
  if (dp_.size() > 1) {
    // TODO(issue 11, item 2): send the delta through comm.compression once src/parallel/compression lands.
    const double t0 = now_s();
    Status st = dp_.all_reduce_async(delta, delta, n, DType::f32, ReduceOp::avg).wait();  // times out
    const double t1 = now_s();
    exposed_wait_s_ += t1 - t0;
    if (trace_) trace_(0, t0, t1);
    TS_RETURN_IF_ERROR(st);
  }
  outer_sgd_step(backend_, anchor(), outer_momentum(), delta, n, cfg_);
  backend_.copy(params, anchor(), n);
  return Status::ok_status();
}

Status LocalSgd::average_over_replicas(float* values, int64_t n) {
  if (dp_.size() == 1) return Status::ok_status();
  return dp_.all_reduce_async(values, values, n, DType::f32, ReduceOp::avg).wait();
}

Status LocalSgd::verify_replicas(std::string_view what) {
  uint64_t h = agreement_hash(anchor(), flat_bytes(store_));
  h = agreement_hash(outer_momentum(), flat_bytes(store_), h);
  if (synced_) h = agreement_hash(store_.params(), flat_bytes(store_), h);
  return check_agreement(dp_, what, h);
}

FlatRange LocalSgd::checkpoint_range() const {
  const int64_t n = store_.numel(), r = dp_.rank(), p = dp_.size();
  return {n * r / p, n * (r + 1) / p};
}

}  // namespace tessera
