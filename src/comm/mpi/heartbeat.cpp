// One-sided heartbeat board (see heartbeat.h for the scheme and why it cannot hang).
#include "comm/mpi/heartbeat.h"

#include <thread>

#include "comm/collective_log.h"

namespace tessera {

namespace {
uint64_t pack(uint64_t seq, CollectiveKind kind) { return (seq << 8) | static_cast<uint64_t>(kind); }
Heartbeat unpack(uint64_t v) { return Heartbeat{v >> 8, static_cast<CollectiveKind>(v & 0xff)}; }
}  // namespace

std::unique_ptr<HeartbeatBoard> HeartbeatBoard::create(MPI_Comm comm) {
  std::unique_ptr<HeartbeatBoard> b(new HeartbeatBoard());
  b->comm_ = comm;
  MPI_Comm_rank(comm, &b->rank_);
  MPI_Comm_size(comm, &b->size_);
  void* base = nullptr;
  if (MPI_Win_allocate(sizeof(uint64_t), sizeof(uint64_t), MPI_INFO_NULL, comm, &base, &b->win_) != MPI_SUCCESS)
    return nullptr;
  MPI_Win_set_errhandler(b->win_, MPI_ERRORS_RETURN);
  b->slot_ = static_cast<uint64_t*>(base);
  *b->slot_ = 0;
  int* model = nullptr;
  int flag = 0;
  MPI_Win_get_attr(b->win_, MPI_WIN_MODEL, &model, &flag);
  b->unified_ = flag && *model == MPI_WIN_UNIFIED;
  // One passive epoch for the window's whole life: posting and reading need no further sync calls.
  MPI_Win_lock_all(MPI_MODE_NOCHECK, b->win_);
  return b;
}

HeartbeatBoard::~HeartbeatBoard() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (leak_ || finalized || win_ == MPI_WIN_NULL) return;
  MPI_Win_unlock_all(win_);
  MPI_Win_free(&win_);
}

void HeartbeatBoard::post(uint64_t seq, CollectiveKind kind) {
  uint64_t v = pack(seq, kind);
  if (unified_) {
    // Unified memory model: the window memory is the public copy; a plain atomic store is seen by
    // remote reads.
    __atomic_store_n(slot_, v, __ATOMIC_RELEASE);
  } else {
    MPI_Put(&v, 1, MPI_UINT64_T, rank_, 0, 1, MPI_UINT64_T, win_);
    MPI_Win_flush(rank_, win_);
  }
}

std::vector<std::optional<Heartbeat>> HeartbeatBoard::read_all(double limit_s) {
  std::vector<std::optional<Heartbeat>> out(size_);
  std::vector<uint64_t> vals(size_, 0);
  std::vector<MPI_Request> reqs(size_, MPI_REQUEST_NULL);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) {
      out[r] = unpack(__atomic_load_n(slot_, __ATOMIC_ACQUIRE));
      continue;
    }
    if (MPI_Rget(&vals[r], 1, MPI_UINT64_T, r, 0, 1, MPI_UINT64_T, win_, &reqs[r]) != MPI_SUCCESS)
      reqs[r] = MPI_REQUEST_NULL;
  }
  double deadline = steady_seconds() + limit_s;
  std::vector<bool> done(size_, false);
  int pending = 0;
  for (int r = 0; r < size_; ++r) pending += (r != rank_ && reqs[r] != MPI_REQUEST_NULL);
  while (pending > 0 && steady_seconds() < deadline) {
    for (int r = 0; r < size_; ++r) {
      if (r == rank_ || done[r] || reqs[r] == MPI_REQUEST_NULL) continue;
      int flag = 0;
      if (MPI_Test(&reqs[r], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        reqs[r] = MPI_REQUEST_NULL;
        --pending;
      } else if (flag) {
        done[r] = true;
        out[r] = unpack(vals[r]);
        --pending;
      }
    }
    if (pending > 0) std::this_thread::yield();
  }
  // Reads still pending hold a pointer into `vals`; the job is about to abort, so keep it alive.
  if (pending > 0) new std::vector<uint64_t>(std::move(vals));
  return out;
}

}  // namespace tessera
