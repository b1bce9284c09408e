// Per-communicator ring buffer of the most recent operations {seq, kind, bytes, start, end, state}:
// what a rank was doing when something went wrong. One per communicator, owned by it (no global state).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "comm/comm_types.h"

namespace tessera {

// released: an unfinished send or matched receive handed to the library, its peer gone (Work::abandon).
enum class OpState : uint8_t { running, done, failed, timed_out, cancelled, released };
std::string_view op_state_name(OpState s);

struct CollectiveRecord {
  uint64_t seq = 0;          // collective seq (or the p2p counter for send/recv)
  CollectiveKind kind = CollectiveKind::none;
  int peer = -1;             // root for broadcast, peer for send/recv, -1 otherwise
  size_t bytes = 0;          // bytes this rank sends or receives in total
  double start_s = 0, end_s = 0;  // steady clock, seconds; end_s = 0 while running
  OpState state = OpState::running;
  // The algorithm the communicator chose for the library ("" = the library's own choice), e.g.
  // "rabenseifner" for an in-place MPI all-reduce (mpi/libnbc_allreduce.h). Points to a literal.
  std::string_view algorithm;
};

// Seconds on the steady clock (the time base of CollectiveRecord).
double steady_seconds();

class CollectiveLog {
 public:
  explicit CollectiveLog(size_t capacity = 64);
  // Returns a ticket for finish(); the record is stamped with start_s = now.
  uint64_t begin(CollectiveRecord rec);
  // No-op when the ticket's slot has been reused (more than `capacity` ops began since).
  void finish(uint64_t ticket, OpState state);
  // Oldest first.
  std::vector<CollectiveRecord> recent() const;
  // One line per record, for error logs.
  std::string format() const;

 private:
  std::vector<CollectiveRecord> ring_;
  std::vector<uint64_t> tickets_;
  uint64_t next_ = 0;
};

}  // namespace tessera
