// Vocabulary shared by every communicator backend: reduction ops, operation kinds, options.
// Backend-neutral on purpose: the MPI backend exists now, an NCCL backend will reuse all of this.
#pragma once
#include <cstdint>
#include <string_view>

namespace tessera {

// avg = sum / size(), applied after the sum (so it rounds like the sum does).
enum class ReduceOp : uint8_t { sum, avg, max, min };

// Collectives (every rank of a communicator takes part, in the same order on every rank) and
// point-to-point ops. Collectives share one sequence counter per communicator; send/recv have their own.
enum class CollectiveKind : uint8_t {
  none, all_reduce, reduce_scatter, all_gather, broadcast, barrier, split, send, recv, all_to_all, all_to_allv
};

std::string_view reduce_op_name(ReduceOp op);
std::string_view collective_kind_name(CollectiveKind kind);
inline bool is_point_to_point(CollectiveKind k) { return k == CollectiveKind::send || k == CollectiveKind::recv; }

struct CommOptions {
  // How long an async wait (Work::wait) may take before it becomes a timeout error naming the
  // ranks that did not arrive. <= 0 waits forever. Sized for slow first steps, not for speed.
  double timeout_s = 60.0;
  // false: blocking calls go straight to the library (MPI_Allreduce, ...) and can hang forever;
  // true: blocking calls run as async + wait, so they time out too. MPI's non-blocking collectives
  // (libnbc in Open MPI 4.1) are slower under 64 KiB (0.5-0.7x at 2 ranks here); above, with the
  // algorithms the MPI communicator pins (mpi/libnbc_allreduce.h), all-reduce ran at 0.9-1.08x.
  bool watch_blocking = false;
  // Records kept in the per-communicator ring buffer of recent operations (diagnostics).
  int history = 64;
};

}  // namespace tessera
