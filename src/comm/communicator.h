// Communicator: the collective and point-to-point interface every parallelism strategy uses.
// Backends: mpi/ (CPU buffers, now); nccl/ (device buffers and streams, later).
//
// Every op has a blocking form returning Status and an async form returning a Work handle.
// Buffers are (pointer, element count, DType) or Tensor views. Element counts:
//   all_reduce      send: count            recv: count            (send == recv: in place)
//   reduce_scatter  send: count * size()   recv: count            (rank r gets block r)
//   all_gather      send: count            recv: count * size()   (block r comes from rank r)
//   all_to_all      send: count * size()   recv: count * size()   (send block s goes to rank s; recv
//                                                                  block r comes from rank r)
//   all_to_allv     send: sum send_counts  recv: sum recv_counts  (as all_to_all with blocks of their
//                                                                  own sizes, packed in rank order)
//   broadcast       buf: count on every rank, root's contents win
//   send / recv     count, matched by (peer, tag)
// Reductions accept f32, bf16, f16, i32 (avg not for i32). bf16/f16 reduce through f32: each
// pairwise step of the backend's reduction tree converts both operands to f32, combines them and
// rounds back (as NCCL does); reduce in f32 when the sum of many ranks must be exact to f32.
// Non-reducing ops move bytes and accept every DType.
//
// Ordering contract (as in MPI): every rank of a communicator issues the same collectives in the
// same order. Each collective gets the next sequence number of this communicator (1, 2, ...), so
// "all_reduce #12" names the same op on every rank. A communicator is used from one thread.
//
// Failures return Status naming the op, its sequence number, the communicator and the rank.
// A timed-out async op (CommOptions::timeout_s) names the ranks that did not arrive; after it the
// communicator is unusable (MPI cannot cancel a collective) and the job must end: abort_job().
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/collective_log.h"
#include "comm/comm_types.h"
#include "comm/work.h"
#include "core/status.h"
#include "core/tensor.h"

namespace tessera {

// One op, as the backend receives it (already validated).
struct CommOp {
  CollectiveKind kind = CollectiveKind::none;
  const void* send = nullptr;
  void* recv = nullptr;
  int64_t count = 0;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
  int peer = -1;  // root (broadcast) or peer (send/recv)
  int tag = 0;
  // all_to_allv: size() elements each (count is then the send total).
  const int64_t* send_counts = nullptr;
  const int64_t* recv_counts = nullptr;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "world", "world/dp", ... used in messages.
  virtual const std::string& name() const = 0;
  // Where its buffers must live (cpu for MPI; cuda for NCCL).
  virtual Device device() const { return Device::cpu; }
  // Sequence number of the last collective issued on this communicator (0 before the first).
  virtual uint64_t collective_seq() const = 0;
  // Recent ops on this communicator, oldest first.
  virtual std::vector<CollectiveRecord> recent_ops() const = 0;
  // Bytes this rank has put on the wire through this communicator, by the usual ring/tree cost
  // model (a model, not a measurement): all-reduce 2(p-1)/p x buffer, reduce-scatter and all-gather
  // (p-1)/p x the whole gathered buffer, broadcast and send the buffer, receives and barriers 0.
  uint64_t traffic_bytes() const { return traffic_bytes_; }
  // The error path's clean-up step. When this rank is about to end the job (abort_job) while its
  // peers may sit in a collective that will never finish, releasing a communicator must not wait
  // for them: after abandon() the communicator accepts no more ops, and its destructor frees only
  // what is local to this rank (buffers, handles), skipping every call that synchronises with
  // peers (MPI_Win_free). Those peer-shared objects are reclaimed when the job ends.
  virtual void abandon() { abandoned_ = true; }
  bool abandoned() const { return abandoned_; }
  // Collective: ranks with the same color form a new communicator, ordered by (key, rank).
  // color < 0: this rank joins none (returns nullptr).
  virtual Result<std::unique_ptr<Communicator>> split(int color, int key, const std::string& name) = 0;
  // A communicator of every rank but `excluded` (ranks of this communicator, sorted), in the same
  // order. Collective over the remaining ranks only: the excluded may be dead or hung (a lost
  // parameter-server worker). Not for an excluded rank to call.
  virtual Result<std::unique_ptr<Communicator>> without(const std::vector<int>& excluded, const std::string& name) = 0;
  // As split(), for a communicator that will carry point-to-point messages only: the backend may
  // leave out what only collectives need (the MPI heartbeat window), so that a rank can free it
  // without its peers -- e.g. the link to a parameter-server worker that died (param_server.h).
  virtual Result<std::unique_ptr<Communicator>> split_point_to_point(int color, int key, const std::string& name) {
    return split(color, key, name);
  }

  // --- raw buffers ---
  Status all_reduce(const void* send, void* recv, int64_t count, DType dt, ReduceOp op = ReduceOp::sum);
  Work all_reduce_async(const void* send, void* recv, int64_t count, DType dt, ReduceOp op = ReduceOp::sum);
  Status reduce_scatter(const void* send, void* recv, int64_t count, DType dt, ReduceOp op = ReduceOp::sum);
  Work reduce_scatter_async(const void* send, void* recv, int64_t count, DType dt, ReduceOp op = ReduceOp::sum);
  Status all_gather(const void* send, void* recv, int64_t count, DType dt);
  Work all_gather_async(const void* send, void* recv, int64_t count, DType dt);
  // count: one block (send and recv must not overlap).
  Status all_to_all(const void* send, void* recv, int64_t count, DType dt);
  Work all_to_all_async(const void* send, void* recv, int64_t count, DType dt);
  // send_counts[s]: elements for rank s; recv_counts[r]: elements from rank r (rank r's
  // send_counts[this rank]); blocks packed in rank order. The count arrays, like the buffers, must
  // stay valid until the op completes. Mixture-of-experts dispatch: each expert's tokens to its rank.
  Status all_to_allv(const void* send, const int64_t* send_counts, void* recv, const int64_t* recv_counts, DType dt);
  Work all_to_allv_async(const void* send, const int64_t* send_counts, void* recv, const int64_t* recv_counts,
                         DType dt);
  Status broadcast(void* buf, int64_t count, DType dt, int root);
  Work broadcast_async(void* buf, int64_t count, DType dt, int root);
  Status send(const void* buf, int64_t count, DType dt, int peer, int tag = 0);
  Work send_async(const void* buf, int64_t count, DType dt, int peer, int tag = 0);
  Status recv(void* buf, int64_t count, DType dt, int peer, int tag = 0);
  Work recv_async(void* buf, int64_t count, DType dt, int peer, int tag = 0);
  Status barrier();
  Work barrier_async();

  // --- tensor views (shapes are checked: numel relations as in the table above) ---
  Status all_reduce(const Tensor& t, ReduceOp op = ReduceOp::sum);  // in place
  Work all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::sum);
  Status reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::sum);
  Work reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::sum);
  Status all_gather(const Tensor& in, const Tensor& out);
  Work all_gather_async(const Tensor& in, const Tensor& out);
  Status broadcast(const Tensor& t, int root);
  Work broadcast_async(const Tensor& t, int root);
  Status send(const Tensor& t, int peer, int tag = 0);
  Status recv(const Tensor& t, int peer, int tag = 0);

 protected:
  // Backends implement these two; the public methods validate arguments first.
  virtual Status run(const CommOp& op) = 0;
  virtual Work start(const CommOp& op) = 0;

 private:
  Status validate(const CommOp& op) const;
  Status validate_tensors(CollectiveKind kind, const Tensor& in, const Tensor& out, int64_t in_mult,
                          int64_t out_mult) const;  // in.numel*in_mult == out.numel*out_mult
  Status run_checked(const CommOp& op);
  Work start_checked(const CommOp& op);
  void count_traffic(const CommOp& op);
  uint64_t traffic_bytes_ = 0;
  bool abandoned_ = false;
};

}  // namespace tessera
