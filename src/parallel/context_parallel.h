// Context parallelism over the grid's cp communicator: the Transformer's ContextParallelHooks
// (model/context_parallel_hooks.h, which has the math) implemented with MPI all-to-all (ulysses) or
// non-blocking sends and receives round the ring (ring).
//
// Usage (every rank of a cp group: the same parameters and sequences, its own positions):
//   Transformer net(backend, cfg, store, B, seq_len / grid.cp().size());
//   ContextParallel cp(grid.cp(), ContextParallelMode::ulysses);
//   net.set_context_parallel_hooks(&cp);
//   net.forward(tokens_of_my_positions, targets_of_my_positions); net.backward();
//   TS_RETURN_IF_ERROR(cp.status());
// and the gradients are averaged over grid.param_replicas() (dp x cp), like data parallelism's.
#pragma once
#include <array>
#include <string>

#include "comm/communicator.h"
#include "core/status.h"
#include "model/context_parallel_hooks.h"

namespace tessera {

// "ulysses" or "ring"; anything else is an error naming the choices.
Result<ContextParallelMode> parse_context_parallel_mode(const std::string& name);

// ok, or an error naming what to change: ulysses: cp must divide seq_len and the heads and KV heads
// left on each tensor-parallel rank; ring: 2 x cp must divide seq_len.
Status validate_context_parallel(int cp, ContextParallelMode mode, int64_t seq_len, int64_t n_head, int64_t n_kv_head,
                                 int tp);

// The ring's exchanges so far: how many, their floats (each direction), the seconds this rank spent
// blocked in ring_wait and in ring_progress (where a shared-memory library copies the data): the
// communication the attention did not hide.
struct RingStats {
  int64_t exchanges = 0;
  int64_t floats = 0;
  double wait_s = 0;
  double progress_s = 0;
};

class ContextParallel final : public ContextParallelHooks {
 public:
  // `cp` (grid.cp()) must outlive this object.
  ContextParallel(Communicator& cp, ContextParallelMode mode) : comm_(cp), mode_(mode) {}
  int cp_rank() const override { return comm_.rank(); }
  int cp_size() const override { return comm_.size(); }
  ContextParallelMode mode() const override { return mode_; }
  void all_to_all(const float* send, float* recv, int64_t block) override;
  void ring_start(int channel, const float* send, float* recv, int64_t count) override;
  void ring_wait(int channel) override;
  void ring_progress() override;
  void all_reduce_sum(int32_t* x, int64_t n) override;
  Status status() const override { return status_; }
  const RingStats& ring_stats() const { return ring_stats_; }
  // Seconds this rank has spent in the exchanges so far (blocked in the all-to-alls, the ring's
  // waits and progress calls, the counts' all-reduce): the context parallelism it did not hide.
  double exposed_s() const { return collective_s_ + ring_stats_.wait_s + ring_stats_.progress_s; }

 private:
  void record(const Status& s, const char* what);
  Communicator& comm_;
  ContextParallelMode mode_;
  struct RingExchange {
    Work send, recv;  // complete when idle
  };
  std::array<RingExchange, 2> ring_;
  RingStats ring_stats_;
  double collective_s_ = 0;  // in the all-to-alls and the counts' all-reduce
  Status status_;
};

}  // namespace tessera
