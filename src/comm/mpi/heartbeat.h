// HeartbeatBoard: the side channel that says which ranks did not arrive at a stuck collective.
//
// Scheme: each communicator owns an MPI window (MPI_Win_allocate, one 64-bit slot per rank). On
// entering a collective a rank writes (seq << 8 | kind) into ITS OWN slot: a local atomic store,
// no message, so the fast path costs nanoseconds. Only when a wait times out does a rank read the
// others' slots, with passive-target MPI_Rget inside a lock_all epoch opened at creation; a peer
// whose seq is below the stuck op's seq did not arrive. A stuck peer never has to answer: on one
// node Open MPI's osc/sm reads its memory directly, and RDMA networks do the same; where the
// one-sided component needs the target's help (osc/pt2pt over TCP), each read is polled with a
// short deadline and reported as "unknown" instead of hanging the diagnosis.
// If the window cannot be created, diagnosis degrades to "peers' progress unknown".
#pragma once
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "comm/comm_types.h"

namespace tessera {

struct Heartbeat {
  uint64_t seq = 0;  // last collective this rank entered on the communicator (0: none yet)
  CollectiveKind kind = CollectiveKind::none;
};

class HeartbeatBoard {
 public:
  // Collective over comm. Returns nullptr if MPI cannot create the window.
  static std::unique_ptr<HeartbeatBoard> create(MPI_Comm comm);
  ~HeartbeatBoard();
  HeartbeatBoard(const HeartbeatBoard&) = delete;
  HeartbeatBoard& operator=(const HeartbeatBoard&) = delete;

  void post(uint64_t seq, CollectiveKind kind);
  // Every rank's last heartbeat; nullopt where the read did not finish within limit_s.
  std::vector<std::optional<Heartbeat>> read_all(double limit_s);
  // Freeing the window is collective: skip it when peers may never join (after a timeout).
  void leak_on_destroy() { leak_ = true; }

 private:
  HeartbeatBoard() = default;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
  uint64_t* slot_ = nullptr;  // this rank's slot (in the window)
  bool unified_ = true;
  bool leak_ = false;
  int rank_ = 0, size_ = 1;
};

}  // namespace tessera
