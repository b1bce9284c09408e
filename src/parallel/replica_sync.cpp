// A chunk's whole update, and the rank-ordered sum shared by the gradient norms.
#include "parallel/replica_sync.h"

#include <string>
#include <vector>


namespace tessera {

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
