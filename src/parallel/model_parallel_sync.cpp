// Gradient combination for dp x tp x pp layouts: per-chunk data parallelism plus the tied-embedding,
// sequence-parallel and norm corrections.
#include "parallel/model_parallel_sync.h"

#include <cmath>
#include <string>

#include "backend/ops.h"
#include "parallel/tensor_parallel.h"

namespace tessera {
namespace {

// Sum of one double from every rank of `comm`, added in rank order so every rank gets the same bits.
Result<double> ordered_sum(Communicator& comm, double local, const char* what) {
  if (comm.size() == 1) return local;
  std::vector<double> parts(static_cast<size_t>(comm.size()));
  const Status s = comm.all_gather_async(&local, parts.data(), sizeof(double), DType::u8).wait();
  if (!s.ok()) return Status(s.code(), std::string(what) + ": " + s.message());
  double total = 0;
  for (double x : parts) total += x;
  return total;
}

}  // namespace

bool is_tied_embedding_copy(const ParamLayout& layout, const ParamInfo& p) {
  return layout.first_layer() > 0 && p.name == "wte";
}

ModelParallelSync::ModelParallelSync(ModelParallelGroups groups, std::vector<ParamStore*> chunks,
                                     const AdamWConfig& optim, int64_t bucket_bytes)
    : g_(groups) {
  for (ParamStore* s : chunks) parts_.push_back({s, std::make_unique<DataParallel>(*g_.dp, *s, optim, bucket_bytes)});
}

Status ModelParallelSync::broadcast_parameters() {
  for (Part& p : parts_) TS_RETURN_IF_ERROR(p.dp->broadcast_parameters());
  return Status::ok_status();
}

void ModelParallelSync::set_sync(bool last_micro_batch) {
  for (Part& p : parts_) p.dp->set_sync(last_micro_batch);
}

void ModelParallelSync::on_layer_ready(int layer) {
  if (parts_.size() == 1) parts_[0].dp->on_layer_ready(layer);
}

Status ModelParallelSync::sum_tied_embedding_grads() {
  if (!g_.embedding) return Status::ok_status();
  for (Part& p : parts_) {
    const ParamLayout& layout = p.store->layout();
    const ParamInfo* wte = layout.find("wte");
    if (!wte || (layout.first_layer() != 0 && !is_tied_embedding_copy(layout, *wte))) continue;
    float* g = p.store->grads() + wte->offset;
    const Status s = g_.embedding->all_reduce_async(g, g, wte->numel, DType::f32, ReduceOp::sum).wait();
    if (!s.ok()) return Status(s.code(), "tied embedding gradient: " + s.message());
  }
  return Status::ok_status();
}

Status ModelParallelSync::finish() {
  Status first_error;
  for (Part& p : parts_) {
    const Status s = p.dp->finish();
    if (!s.ok() && first_error.ok()) first_error = s;
  }
  TS_RETURN_IF_ERROR(first_error);
  if (g_.sequence_parallel && g_.tp->size() > 1)  // replicated tensors saw only this rank's rows
    for (Part& p : parts_) TS_RETURN_IF_ERROR(sequence_parallel_reduce_replicated_grads(*p.store, *g_.tp));
  return sum_tied_embedding_grads();
}

Result<double> ModelParallelSync::grad_sum_of_squares() {
  double local = 0;
  for (Part& p : parts_) {
    const ParamLayout& layout = p.store->layout();
    for (const ParamInfo& info : layout.params()) {
      if (info.split == TpSplit::replicated && g_.tp->rank() != 0) continue;  // counted on tp rank 0
      if (is_tied_embedding_copy(layout, info)) continue;                      // counted on the first stage
      local += ops::sum_of_squares(p.store->grads() + info.offset, info.numel);
    }
  }
  TS_ASSIGN_OR_RETURN(double over_tp, ordered_sum(*g_.tp, local, "gradient norm over the tp group"));
  return ordered_sum(*g_.pp, over_tp, "gradient norm over the pp group");
}

Result<float> ModelParallelSync::clip_grad_norm(float max_norm) {
  TS_ASSIGN_OR_RETURN(double ss, grad_sum_of_squares());
  const double norm = std::sqrt(ss);
  if (max_norm > 0 && norm > max_norm) {
    const float scale = static_cast<float>(max_norm / (norm + 1e-6));
    for (Part& p : parts_) {
      float* g = p.store->grads();
      for (int64_t i = 0; i < p.store->numel(); ++i) g[i] *= scale;
    }
  }
  return static_cast<float>(norm);
}

void ModelParallelSync::optimizer_step(float lr) {
  for (Part& p : parts_) p.dp->optimizer_step(lr);
}

Status ModelParallelSync::average_over_replicas(float* values, int64_t n) {
  return parts_[0].dp->average_over_replicas(values, n);
}

Status ModelParallelSync::verify_replicas(std::string_view what) {
  for (size_t c = 0; c < parts_.size(); ++c)
    TS_RETURN_IF_ERROR(parts_[c].dp->verify_replicas(std::string(what) + " (chunk " + std::to_string(c) + ")"));
  return Status::ok_status();
}

double ModelParallelSync::exposed_wait_s() const {
  double s = 0;
  for (const Part& p : parts_) s += p.dp->exposed_wait_s();
  return s;
}

void ModelParallelSync::set_trace(TraceFn fn) {
  for (Part& p : parts_) p.dp->set_trace(fn);
}

}  // namespace tessera
