// Gradient combination for dp x tp x pp layouts: per-chunk data parallelism plus the tied-embedding,
// sequence-parallel and norm corrections.
#include "parallel/model_parallel_sync.h"

#include <cmath>
#include <string>

#include "parallel/tensor_parallel.h"

namespace tessera {

bool is_tied_embedding_copy(const ParamLayout& layout, const ParamInfo& p) {
  return layout.first_layer() > 0 && p.name == "wte";
}

ModelParallelSync::ModelParallelSync(Backend& backend, ModelParallelGroups groups, std::vector<ParamStore*> chunks,
                                     const MakeReplicaSync& make)
    : backend_(backend), g_(groups) {
  for (ParamStore* s : chunks) parts_.push_back({s, make(*s)});
}

std::vector<OwnedState> ModelParallelSync::owned_state() {
  std::vector<OwnedState> out;
  for (size_t c = 0; c < parts_.size(); ++c)
    for (OwnedState o : parts_[c].dp->owned_state()) {
      o.chunk = static_cast<int>(c);
      out.push_back(o);
    }
  return out;
}

Status ModelParallelSync::broadcast_parameters() {
  for (Part& p : parts_) TS_RETURN_IF_ERROR(p.dp->broadcast_parameters());
  return Status::ok_status();
}

void ModelParallelSync::begin_micro_batch(bool completes_step) {
  for (Part& p : parts_) p.dp->begin_micro_batch(completes_step);
}

Status ModelParallelSync::sum_tied_embedding_grads() {
  if (!g_.embedding) return Status::ok_status();
  for (Part& p : parts_) {
    const ParamLayout& layout = p.store->layout();
    const ParamInfo* wte = layout.find("wte");
    if (!wte || (layout.first_layer() != 0 && !is_tied_embedding_copy(layout, *wte))) continue;
    const Status s = p.dp->sum_grad_over(*g_.embedding, *wte);
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
    for (Part& p : parts_) TS_RETURN_IF_ERROR(sequence_parallel_reduce_replicated_grads(backend_, *p.store, *g_.tp));
  return sum_tied_embedding_grads();
}

Result<double> ModelParallelSync::grad_sum_of_squares() {
  double local = 0;
  for (Part& p : parts_) {
    const ParamLayout& layout = p.store->layout();
    const bool tp_lead = g_.tp->rank() == 0;
    TS_ASSIGN_OR_RETURN(double part, p.dp->grad_sum_of_squares([&](const ParamInfo& info) {
      if (info.split == TpSplit::replicated && !tp_lead) return false;  // counted on tp rank 0
      return !is_tied_embedding_copy(layout, info);                    // counted on the first stage
    }));
    local += part;
  }
  TS_ASSIGN_OR_RETURN(double over_tp, ordered_sum(*g_.tp, local, "gradient norm over the tp group"));
  return ordered_sum(*g_.pp, over_tp, "gradient norm over the pp group");
}

Result<UpdateResult> ModelParallelSync::update(float lr, float max_norm, Timeline& timeline) {
  if (parts_.size() == 1 && g_.tp->size() == 1 && g_.pp->size() == 1) return parts_[0].dp->update(lr, max_norm, timeline);
  return timed_update(
      timeline,
      [&]() -> Result<float> {
        TS_ASSIGN_OR_RETURN(const double ss, grad_sum_of_squares());
        const double norm = std::sqrt(ss);
        if (max_norm > 0 && norm > max_norm) {
          const float scale = static_cast<float>(max_norm / (norm + 1e-6));
          for (Part& p : parts_) p.dp->scale_grads(scale);
        }
        for (Part& p : parts_) p.dp->step_owned(lr);
        return static_cast<float>(norm);
      },
      [&] {
        for (Part& p : parts_) TS_RETURN_IF_ERROR(p.dp->complete_update());
        return Status::ok_status();
      });
}

Status ModelParallelSync::average_over_replicas(float* values, int64_t n) {
  return parts_[0].dp->average_over_replicas(values, n);
}

Status ModelParallelSync::verify_replicas(std::string_view what) {
  if (parts_.size() == 1) return parts_[0].dp->verify_replicas(what);
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
