// Expert parallelism over the grid's ep communicator: the Transformer's ExpertParallelHooks
// (model/expert_parallel_hooks.h, which has the scheme) implemented with MPI all-to-all (counts)
// and all-to-allv (rows).
//
// Usage (every rank of an ep group: the same dense parameters, its own experts and data):
//   Transformer net(backend, cfg, store, B, T);
//   ExpertParallel ep(grid.ep());
//   net.set_expert_parallel_hooks(&ep);
//   net.forward(tokens, targets); net.backward();
//   TS_RETURN_IF_ERROR(ep.status());
// and the gradients are reduced by DataParallel with ShardedExperts{&grid.dp(), &grid.ep()} (the
// store's layout built with ExpertShard{ep rank, ep}; plan/parallel_layout.h: stored_experts).
#pragma once
#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"
#include "model/expert_parallel_hooks.h"

namespace tessera {

// ok, or an error naming what to change: ep > 1 needs a mixture-of-experts model whose
// model.moe_experts it divides.
Status validate_expert_parallel(int ep, int64_t moe_experts);

// What the exchanges have moved so far: rows each way are counted once, on the sending side,
// including the rows a rank keeps for its own experts (which MPI copies locally).
struct ExpertExchangeStats {
  int64_t exchanges = 0;     // exchange_rows calls
  int64_t bytes_sent = 0;    // to other ranks
  int64_t bytes_kept = 0;    // to this rank itself
  double seconds = 0;        // blocked in the exchanges (counts included; time computing while rows travel excluded)
};

class ExpertParallel final : public ExpertParallelHooks {
 public:
  // `ep` (grid.ep()) must outlive this object.
  explicit ExpertParallel(Communicator& ep) : comm_(ep) {}
  int ep_rank() const override { return comm_.rank(); }
  int ep_size() const override { return comm_.size(); }
  void exchange_counts(const int32_t* send, int32_t* recv, int64_t n) override;
  void start_rows(const float* send, const int64_t* send_rows, float* recv, const int64_t* recv_rows,
                  int64_t width) override;
  void progress_rows() override;
  void finish_rows() override;
  Status status() const override { return status_; }
  const ExpertExchangeStats& stats() const { return stats_; }

 private:
  void record(const Status& s, const char* what);
  Communicator& comm_;
  Work rows_;                                   // the exchange in flight (complete when none)
  std::vector<int64_t> send_counts_, recv_counts_;  // its element counts, read by MPI until it completes
  ExpertExchangeStats stats_;
  Status status_;
};

}  // namespace tessera
