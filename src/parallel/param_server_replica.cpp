// Norm counting and tp/pp gradient corrections of a parameter-server worker's replica.
#include "parallel/param_server_replica.h"

#include <cmath>
#include <string>

#include "parallel/replica_sync.h"
#include "parallel/tensor_parallel.h"

namespace tessera {

bool counts_towards_norm(const ParamLayout& layout, const ParamInfo& p) {
  if (p.split == TpSplit::replicated && layout.tp().rank != 0) return false;  // counted on tp rank 0
  return !is_tied_embedding_copy(layout, p);                                  // counted on the first stage
}

Status correct_replica_grads(Backend& backend, const ModelParallelGroups& g, const std::vector<ParamStore*>& chunks) {
  if (g.sequence_parallel && g.tp->size() > 1)  // replicated tensors saw only this rank's rows
    for (ParamStore* s : chunks) TS_RETURN_IF_ERROR(sequence_parallel_reduce_replicated_grads(backend, *s, *g.tp));
  if (!g.embedding) return Status::ok_status();
  for (ParamStore* s : chunks) {
    const ParamLayout& layout = s->layout();
    const ParamInfo* wte = layout.find("wte");
    if (!wte || (layout.first_layer() != 0 && !is_tied_embedding_copy(layout, *wte))) continue;
    const Status st = sum_full_grad_over(*g.embedding, *s, *wte);
    if (!st.ok()) return Status(st.code(), "tied embedding gradient: " + st.message());
  }
  return Status::ok_status();
}

Result<double> replica_grad_norm(Backend& backend, const ModelParallelGroups& g, const std::vector<ParamStore*>& chunks) {
  double local = 0;
  for (ParamStore* s : chunks) {
    const ParamLayout& layout = s->layout();
    local += full_grad_sum_of_squares(backend, *s, [&layout](const ParamInfo& p) { return counts_towards_norm(layout, p); });
  }
  TS_ASSIGN_OR_RETURN(double over_tp, ordered_sum(*g.tp, local, "gradient norm over the tp group"));
  TS_ASSIGN_OR_RETURN(double total, ordered_sum(*g.pp, over_tp, "gradient norm over the pp group"));
  return std::sqrt(total);
}

}  // namespace tessera
