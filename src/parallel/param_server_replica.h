// What a parameter-server run needs of a replica that spans tp x pp ranks: which tensors count
// towards the gradient norm (shared by workers and servers), and the tensor/pipeline-parallel
// corrections a worker applies to its local gradients before pushing them -- the same ones
// ModelParallelSync applies before its data-parallel reduction (model_parallel_sync.h).
#pragma once
#include <vector>

#include "comm/communicator.h"
#include "model/param_layout.h"
#include "parallel/model_parallel_sync.h"

namespace tessera {

// Whether tensor p of a chunk with this layout counts towards the global gradient norm: each
// element of the model once (replicated tensors on tp rank 0 only, never the last stage's copy of
// a tied embedding).
bool counts_towards_norm(const ParamLayout& layout, const ParamInfo& p);

// Sequence-parallel sums of the replicated tensors over tp, then the tied embedding's sum over the
// embedding group: afterwards every rank holds its chunks' whole gradient (of its own batch slice).
// Collective over g.tp (with sequence parallelism) and g.embedding (when set).
Status correct_replica_grads(Backend& backend, const ModelParallelGroups& g, const std::vector<ParamStore*>& chunks);

// The replica's gradient norm (counted tensors, summed in rank order over tp, then pp): the same
// bits on every rank of the replica. Collective over g.tp and g.pp.
Result<double> replica_grad_norm(Backend& backend, const ModelParallelGroups& g, const std::vector<ParamStore*>& chunks);

}  // namespace tessera
