// Context parallelism over the grid's cp communicator: the Transformer's ContextParallelHooks
// (model/context_parallel_hooks.h, which has the math) implemented with MPI all-to-all.
//
// Usage (every rank of a cp group: the same parameters and sequences, its own positions):
//   Transformer net(backend, cfg, store, B, seq_len / grid.cp().size());
//   ContextParallel cp(grid.cp());
//   net.set_context_parallel_hooks(&cp);
//   net.forward(tokens_of_my_positions, targets_of_my_positions); net.backward();
//   TS_RETURN_IF_ERROR(cp.status());
// and the gradients are averaged over grid.param_replicas() (dp x cp), like data parallelism's.
#pragma once
#include "comm/communicator.h"
#include "core/status.h"
#include "model/context_parallel_hooks.h"

namespace tessera {

// ok, or an error naming what to change: cp must divide seq_len and (ulysses) the heads and KV
// heads left on each tensor-parallel rank.
Status validate_context_parallel(int cp, int64_t seq_len, int64_t n_head, int64_t n_kv_head, int tp);

class ContextParallel final : public ContextParallelHooks {
 public:
  // `cp` (grid.cp()) must outlive this object.
  explicit ContextParallel(Communicator& cp) : comm_(cp) {}
  int cp_rank() const override { return comm_.rank(); }
  int cp_size() const override { return comm_.size(); }
  void all_to_all(const float* send, float* recv, int64_t block) override;
  Status status() const override { return status_; }

 private:
  Communicator& comm_;
  Status status_;
};

}  // namespace tessera
