// A chunk's whole update, and the rank-ordered sum shared by the gradient norms.
#include "parallel/replica_sync.h"

#include <cmath>
#include <string>
#include <vector>

#include "comm/agreement.h"


namespace tessera {

std::vector<std::pair<int64_t, int64_t>> dense_ranges(const ParamLayout& layout) {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t begin = 0;
  for (const auto& [b, e] : expert_ranges(layout)) {
    if (b > begin) out.emplace_back(begin, b);
    begin = e;
  }
  if (layout.total_numel() > begin) out.emplace_back(begin, layout.total_numel());
  return out;
}

Status broadcast_with_sharded_experts(Communicator& replicas, const ShardedExperts& experts, ParamStore& store) {
  TS_RETURN_IF_ERROR(experts.replicas->broadcast(store.params(), store.numel(), DType::f32, 0));
  for (const auto& [b, e] : dense_ranges(store.layout()))
    TS_RETURN_IF_ERROR(replicas.broadcast(store.params() + b, e - b, DType::f32, 0));
  return Status::ok_status();
}

namespace {
uint64_t hash_floats(const float* x, int64_t n) {
  return agreement_hash(std::string_view(reinterpret_cast<const char*>(x), static_cast<size_t>(n) * sizeof(float)));
}
}  // namespace

Status verify_replica_parameters(Communicator& replicas, const ShardedExperts& experts, const ParamStore& store,
                                 std::string_view what) {
  // crosses to the host: the replica hash reads the whole parameter buffer
  std::vector<float> params(static_cast<size_t>(store.numel()));
  store.copy_params_to_host(0, store.numel(), params.data());
  const uint64_t whole = hash_floats(params.data(), store.numel());
  if (!experts.enabled()) return check_agreement(replicas, what, whole);
  uint64_t dense = 0;
  for (const auto& [b, e] : dense_ranges(store.layout())) dense = dense * 1099511628211ull ^ hash_floats(params.data() + b, e - b);
  TS_RETURN_IF_ERROR(check_agreement(replicas, std::string(what) + " (dense tensors)", dense));
  return check_agreement(*experts.replicas, std::string(what) + " (this rank's experts)", whole);
}

double full_grad_sum_of_squares(Backend& backend, const ParamStore& store, const CountedTensor& counted) {
  double sum = 0;
  for (const ParamInfo& p : store.layout().params())
    if (counted(p)) sum += backend.sum_of_squares(store.grads() + p.offset, p.numel);
  return sum;
}

Status sum_full_grad_over(Communicator& group, ParamStore& store, const ParamInfo& p) {
  float* g = store.grads() + p.offset;
  return group.all_reduce_async(g, g, p.numel, DType::f32, ReduceOp::sum).wait();
}

Result<double> ordered_sum(Communicator& comm, double local, const char* what) {
  if (comm.size() == 1) return local;
  std::vector<double> parts(static_cast<size_t>(comm.size()));
  const Status s = comm.all_gather_async(&local, parts.data(), sizeof(double), DType::u8).wait();
  if (!s.ok()) return Status(s.code(), std::string(what) + ": " + s.message());
  double total = 0;
  for (double x : parts) total += x;
  return total;
}

Result<float> clip_by_global_norm(ReplicaSync& sync, float max_norm) {
  TS_ASSIGN_OR_RETURN(const double ss, sync.grad_sum_of_squares([](const ParamInfo&) { return true; }));
  const double norm = std::sqrt(ss);
  if (max_norm > 0 && norm > max_norm) sync.scale_grads(static_cast<float>(max_norm / (norm + 1e-6)));
  return static_cast<float>(norm);
}

Result<UpdateResult> timed_update(Timeline& timeline, const std::function<Result<float>()>& clip_and_step,
                                  const std::function<Status()>& complete) {
  UpdateResult r;
  {
    TimelineSpan span(timeline, "optimizer", "compute");
    TS_ASSIGN_OR_RETURN(r.grad_norm, clip_and_step());
  }
  TS_RETURN_IF_ERROR(timed_wait(timeline, "parameter sync wait", &r.parameter_wait_s, complete));
  return r;
}

Result<UpdateResult> ReplicaSync::update(float lr, float max_norm, Timeline& timeline) {
  return timed_update(
      timeline,
      [&]() -> Result<float> {
        TS_ASSIGN_OR_RETURN(const float norm, clip_own_grad_norm(max_norm));
        step_owned(lr);
        return norm;
      },
      [&] { return complete_update(); });
}

}  // namespace tessera
