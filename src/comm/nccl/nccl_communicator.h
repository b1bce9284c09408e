// NcclCommunicator: the Communicator on NCCL for buffers in GPU memory (issue 20 item 1, first cut).
// Bootstrapped through another communicator (MPI): rank 0 makes the NCCL unique id and broadcasts
// it over the bootstrap's host buffers, once per communicator; split / without split the bootstrap
// and make a new NCCL communicator over the new group.
//
// Ordering: an op first waits for every op the device backend has issued (Backend::synchronize: the
// simple, correct order; events between the backend's compute stream and this stream are the next
// step), then runs on this communicator's own stream; a blocking op waits for it, an async op
// records an event its Work tests and waits on. Errors name the op, the communicator and the rank;
// after abandon() the NCCL communicator is aborted (ncclCommAbort), which ends a collective whose
// peers are gone.
//
// Lives in the CUDA build's NCCL plugin (libtessera_nccl.so, comm/nccl_plugin.h): nothing else links
// NCCL. Compiled; not yet run on a GPU.
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "comm/collective_log.h"
#include "comm/communicator.h"

namespace tessera {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `bootstrap` (which the new communicator keeps, for splits and for its host
  // traffic). Every rank must be on its own GPU (NCCL refuses two ranks of a communicator on one).
  static Result<std::unique_ptr<NcclCommunicator>> create(std::unique_ptr<Communicator> bootstrap, Backend& device);
  ~NcclCommunicator() override;

  int rank() const override { return bootstrap_->rank(); }
  int size() const override { return bootstrap_->size(); }
  const std::string& name() const override { return bootstrap_->name(); }
  Device device() const override { return Device::cuda; }
  uint64_t collective_seq() const override { return seq_; }
  std::vector<CollectiveRecord> recent_ops() const override { return log_.recent(); }
  void abandon() override;
  Result<std::unique_ptr<Communicator>> split(int color, int key, const std::string& name) override;
  Result<std::unique_ptr<Communicator>> without(const std::vector<int>& excluded, const std::string& name) override;

 protected:
  Status run(const CommOp& op) override;
  Work start(const CommOp& op) override;

 private:
  NcclCommunicator(std::unique_ptr<Communicator> bootstrap, Backend& device);
  Result<std::unique_ptr<Communicator>> wrap(Result<std::unique_ptr<Communicator>> bootstrap);
  // Enqueues the op on stream_ (after the backend's work); the status of the enqueueing.
  Status enqueue(const CommOp& op);
  Status failure(const CommOp& op, const std::string& what) const;

  std::unique_ptr<Communicator> bootstrap_;
  Backend& be_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* barrier_word_ = nullptr;  // one device int for barrier()
  uint64_t seq_ = 0;
  CollectiveLog log_;
};

}  // namespace tessera
