// TensorParallel hooks (all-reduce over the tp communicator, first failure kept) and the tp-aware
// gradient norm.
#include "parallel/tensor_parallel.h"

#include <cmath>
#include <string>
#include <vector>

namespace tessera {

void TensorParallel::all_reduce(const TpRegion& r, ReduceOp op, const char* hook) {
  if (comm_.size() == 1 || !status_.ok()) return;  // a world of one; or the group is already broken
  const Status s = comm_.all_reduce_async(r.data, r.data, r.rows * r.cols, DType::f32, op).wait();
  if (!s.ok()) {
    status_ = Status(s.code(), "tensor parallel " + std::string(hook) + " at " + tp_point_name(r.point) +
                                   " (layer " + std::to_string(r.layer) + "): " + s.message());
  }
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

Result<float> tp_clip_grad_norm(ParamStore& store, Communicator& tp, float max_norm) {
  Result<double> ss = tp_grad_sum_of_squares(store, tp);
  if (!ss.ok()) return ss.status();
  const double norm = std::sqrt(*ss);
  if (max_norm > 0 && norm > max_norm) {
    const float scale = static_cast<float>(max_norm / (norm + 1e-6));
    float* g = store.grads();
    for (int64_t i = 0; i < store.numel(); ++i) g[i] *= scale;
  }
  return static_cast<float>(norm);
}

}  // namespace tessera
