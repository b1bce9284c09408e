// TensorParallel hooks (all-reduce, or all-gather / reduce-scatter along rows under sequence
// parallelism, over the tp communicator; first failure kept), the tp-aware gradient norm and the
// sequence-parallel sum of replicated gradients.
#include "parallel/tensor_parallel.h"

#include <cmath>
#include <string>
#include <vector>

namespace tessera {

void TensorParallel::fail(const Status& s, const TpRegion& r, const char* hook) {
  status_ = Status(s.code(), "tensor parallel " + std::string(hook) + " at " + tp_point_name(r.point) + " (layer " +
                                 std::to_string(r.layer) + "): " + s.message());
}

void TensorParallel::all_reduce(const TpRegion& r, ReduceOp op, const char* hook) {
  if (comm_.size() == 1 || !status_.ok()) return;  // a world of one; or the group is already broken
  const Status s = comm_.all_reduce_async(r.data, r.data, r.rows * r.cols, DType::f32, op).wait();
  if (!s.ok()) fail(s, r, hook);
}

bool TensorParallel::rows_divide(const TpRegion& r, const char* hook) {
  if (r.rows % comm_.size() == 0) return true;
  fail(validate_sequence_parallel(r.rows, comm_.size()), r, hook);
  return false;
}

void TensorParallel::all_gather_rows(const TpRegion& r, const char* hook) {
  if (comm_.size() == 1 || !status_.ok() || !rows_divide(r, hook)) return;
  const int64_t count = r.rows / comm_.size() * r.cols;  // one rank's rows
  // Sending from this rank's block of the receive buffer is the in-place form.
  const Status s = comm_.all_gather_async(r.data + comm_.rank() * count, r.data, count, DType::f32).wait();
  if (!s.ok()) fail(s, r, hook);
}

void TensorParallel::reduce_scatter_rows(const TpRegion& r, const char* hook) {
  if (comm_.size() == 1 || !status_.ok() || !rows_divide(r, hook)) return;
  const int64_t count = r.rows / comm_.size() * r.cols;
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  if (scatter_.bytes() < bytes) scatter_ = backend_.allocate(bytes, MemCategory::communication);
  const Status s = comm_.reduce_scatter_async(r.data, scatter_.data(), count, DType::f32, ReduceOp::sum).wait();
  if (!s.ok()) return fail(s, r, hook);
  backend_.copy(r.data + comm_.rank() * count, scatter_.as<float>(), count);
}

namespace {
double sum_of_squares(const float* x, int64_t n) {
  double acc[8] = {};  // fixed lanes: one summation order, and the loop vectorises
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += static_cast<double>(x[i + j]) * x[i + j];
  for (int j = 0; i + j < n; ++j) acc[j] += static_cast<double>(x[i + j]) * x[i + j];
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}
}  // namespace

Result<double> tp_grad_sum_of_squares(const ParamStore& store, Communicator& tp) {
  const ParamLayout& layout = store.layout();
  double local = 0;
  for (const ParamInfo& p : layout.params()) {
    if (p.split == TpSplit::replicated && tp.rank() != 0) continue;  // counted once, on rank 0
    local += sum_of_squares(store.grads() + p.offset, p.numel);
  }
  if (tp.size() == 1) return local;
  // No f64 reductions: gather each rank's double as bytes and add them in rank order everywhere.
  std::vector<double> parts(static_cast<size_t>(tp.size()));
  const Status s = tp.all_gather_async(&local, parts.data(), sizeof(double), DType::u8).wait();
  if (!s.ok()) return Status(s.code(), "tensor-parallel gradient norm: " + s.message());
  double total = 0;
  for (double x : parts) total += x;
  return total;
}

Result<float> tp_clip_grad_norm(Backend& backend, ParamStore& store, Communicator& tp, float max_norm) {
  Result<double> ss = tp_grad_sum_of_squares(store, tp);
  if (!ss.ok()) return ss.status();
  const double norm = std::sqrt(*ss);
  if (max_norm > 0 && norm > max_norm) {
    const float scale = static_cast<float>(max_norm / (norm + 1e-6));
    backend.scale_inplace(store.grads(), store.numel(), scale);
  }
  return static_cast<float>(norm);
}

Status sequence_parallel_reduce_replicated_grads(Backend& backend, ParamStore& store, Communicator& tp) {
  if (tp.size() == 1) return Status::ok_status();
  const ParamLayout& layout = store.layout();
  int64_t total = 0;
  for (const ParamInfo& p : layout.params())
    if (p.split == TpSplit::replicated) total += p.numel;
  if (total == 0) return Status::ok_status();
  // Pack, one all-reduce, unpack: the replicated tensors are many small ones (norms, biases).
  std::vector<float> packed(static_cast<size_t>(total));
  float* g = store.grads();
  int64_t at = 0;
  for (const ParamInfo& p : layout.params()) {
    if (p.split != TpSplit::replicated) continue;
    backend.copy(packed.data() + at, g + p.offset, p.numel);
    at += p.numel;
  }
  const Status s = tp.all_reduce_async(packed.data(), packed.data(), total, DType::f32, ReduceOp::sum).wait();
  if (!s.ok()) return Status(s.code(), "sequence parallelism: sum of the replicated gradients: " + s.message());
  at = 0;
  for (const ParamInfo& p : layout.params()) {
    if (p.split != TpSplit::replicated) continue;
    backend.copy(g + p.offset, packed.data() + at, p.numel);
    at += p.numel;
  }
  return Status::ok_status();
}

}  // namespace tessera
