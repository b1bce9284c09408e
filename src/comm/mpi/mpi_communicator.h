// MpiCommunicator: the Communicator on MPI (CPU buffers). Blocking ops call the MPI collective
// directly (MPI_Allreduce, ...) so the wrapper adds nanoseconds: a sequence number, a heartbeat
// store and a ring-buffer record. Async ops use MPI's non-blocking collectives and are polled
// (MPI_Test, then yields, then short sleeps) against CommOptions::timeout_s; a timeout becomes a
// Status naming the op, its sequence number and the ranks that did not arrive (heartbeat.h).
// Set CommOptions::watch_blocking to give blocking ops the timeout too (at the cost of MPI's
// non-blocking algorithms). Every MPI communicator here has MPI_ERRORS_RETURN set.
// Async all-reduces of >= 64 KiB never run libnbc's binomial tree (2-3x slower on slow links): in
// place at >= 4 ranks they run what Open MPI picks out of place, at 2-3 ranks the ring (libnbc_allreduce.h).
#pragma once
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi/heartbeat.h"
#include "comm/mpi/libnbc_allreduce.h"
#include "comm/mpi/mpi_types.h"

namespace tessera {

class MpiWork;

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates MPI_COMM_WORLD (so our traffic and error handler are our own). Needs MPI
  // initialised (MpiRuntime). Collective over the world.
  static Result<std::unique_ptr<MpiCommunicator>> create_world(const CommOptions& options = {});
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  uint64_t collective_seq() const override { return seq_; }
  std::vector<CollectiveRecord> recent_ops() const override { return log_.recent(); }
  Result<std::unique_ptr<Communicator>> split(int color, int key, const std::string& name) override;
  // MPI_Comm_create_group over the group without `excluded` (MPI-3: only its members take part).
  Result<std::unique_ptr<Communicator>> without(const std::vector<int>& excluded, const std::string& name) override;
  // No heartbeat window: a timeout on it cannot say what a peer last entered (it enters no
  // collectives), and freeing it is local (MPI_Comm_free), whoever is gone.
  Result<std::unique_ptr<Communicator>> split_point_to_point(int color, int key, const std::string& name) override;

  MPI_Comm mpi_comm() const { return comm_; }
  const CommOptions& options() const { return options_; }
  // World rank of each rank of this communicator.
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  // Non-empty once an op timed out: the communicator refuses further ops.
  const std::string& broken_reason() const { return broken_; }
  // The MPI_T handle that picks libnbc's all-reduce algorithm for in-place calls (shared by a
  // communicator family); usable() false: in-place calls get libnbc's own choice, why_not() says why.
  const LibnbcAllreduceKnob& allreduce_knob() const { return *knob_; }

 protected:
  Status run(const CommOp& op) override;
  Work start(const CommOp& op) override;

 private:
  friend class MpiWork;
  MpiCommunicator(MPI_Comm comm, std::string name, const CommOptions& options, std::shared_ptr<MpiReduceOps> ops,
                  std::shared_ptr<LibnbcAllreduceKnob> knob, bool heartbeat = true);
  Result<std::unique_ptr<Communicator>> split_with(int color, int key, const std::string& name, bool heartbeat);

  struct Begun {
    uint64_t seq;
    uint64_t ticket;
  };
  Begun begin(const CommOp& op, NbcAllreduceAlg alg = NbcAllreduceAlg::library);
  int call_blocking(const CommOp& op);
  // The algorithm to pin for this async op (allreduce_pin); library for everything but all-reduce.
  NbcAllreduceAlg async_pin(const CommOp& op) const;
  // args: all_to_allv's counts and displacements (alltoallv_args), alive until the op completes.
  int call_nonblocking(const CommOp& op, NbcAllreduceAlg alg, MPI_Request* req, const std::vector<int>& args);
  void post_process(const CommOp& op);
  std::string label(const CommOp& op, uint64_t seq) const;
  Status mpi_failure(const CommOp& op, uint64_t seq, int err);
  Status timeout_failure(const CommOp& op, uint64_t seq, double waited_s);
  std::string describe_peers(const CommOp& op, uint64_t seq);

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::string name_;
  CommOptions options_;
  int rank_ = 0, size_ = 1;
  std::vector<int> world_ranks_;
  uint64_t seq_ = 0, p2p_seq_ = 0;
  CollectiveLog log_;
  std::unique_ptr<HeartbeatBoard> board_;
  std::shared_ptr<MpiReduceOps> ops_;
  std::shared_ptr<LibnbcAllreduceKnob> knob_;
  std::string broken_;
};

}  // namespace tessera
