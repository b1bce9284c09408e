// StagedCommunicator: collectives on a device backend's buffers through host memory and another
// communicator (MPI): each op copies its input from the device into host staging, runs there, and
// copies its output back. It is the path for GPU ranks without an NCCL link between them, and for
// several processes sharing one GPU (NCCL refuses two ranks of a communicator on one device), which
// is how many-rank layouts are tested on one GPU. Correct for any backend; fast for none (every op
// crosses the host/device line twice and waits for the device's stream).
//
// Only device memory is staged (Backend::is_device_memory): an op on host buffers -- the agreement
// checks, checkpoint tags and other control traffic of a run -- goes to the host communicator as it
// is, so one staged world can carry both.
//
// Ordering: the staging copies wait for the backend's current stream (Backend::copy_to_host), so an
// op sees every kernel issued before it; its output is on the device when wait() (or a true test())
// returns, as with the inner communicator's host buffers.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"

namespace tessera {

class StagedCommunicator final : public Communicator {
 public:
  // `host`: the communicator that moves the bytes (host buffers); `device`: whose memory the
  // callers' buffers are. The backend must outlive this communicator.
  StagedCommunicator(std::unique_ptr<Communicator> host, Backend& device);

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const std::string& name() const override { return host_->name(); }
  Device device() const override { return be_.device(); }
  uint64_t collective_seq() const override { return host_->collective_seq(); }
  std::vector<CollectiveRecord> recent_ops() const override { return host_->recent_ops(); }
  void abandon() override;
  Result<std::unique_ptr<Communicator>> split(int color, int key, const std::string& name) override;
  Result<std::unique_ptr<Communicator>> without(const std::vector<int>& excluded, const std::string& name) override;
  Result<std::unique_ptr<Communicator>> split_point_to_point(int color, int key, const std::string& name) override;

  Communicator& host() { return *host_; }

 protected:
  Status run(const CommOp& op) override;
  Work start(const CommOp& op) override;

 private:
  Result<std::unique_ptr<Communicator>> wrap(Result<std::unique_ptr<Communicator>> inner);
  std::unique_ptr<Communicator> host_;
  Backend& be_;
};

}  // namespace tessera
