// Work: the handle of an asynchronous communication op. wait() blocks until it finishes, fails or
// times out; test() asks without blocking (and drives progress: MPI's non-blocking collectives only
// advance inside MPI calls, so call test() now and then while computing to get real overlap).
#pragma once
#include <cstdint>
#include <memory>

#include "core/status.h"

namespace tessera {

// What Work::abandon() did with an op.
enum class Abandoned : uint8_t { finished, withdrawn, handed_over };

// What a backend implements for one in-flight op. A future NCCL backend's wait() will make the
// caller's stream wait on the op's event instead of blocking the host.
class WorkImpl {
 public:
  virtual ~WorkImpl() = default;
  // true once the op has finished (successfully or not); then status() is final.
  virtual bool test() = 0;
  // Blocks until finished or timed out; returns the final status.
  virtual Status wait() = 0;
  // A receive that may never be matched: withdraws it. true when it was withdrawn, false when it had
  // already finished (then the data arrived). Ops that cannot be withdrawn (collectives) wait.
  virtual bool cancel() {
    (void)wait();
    return false;
  }
  // The peer is gone (its process died or hangs): stop tracking the op without waiting for it.
  // A receive nothing has matched is withdrawn. A send that has not finished, or a receive whose
  // message was matched but never fully arrived (its sender died mid-transfer), is handed to the
  // library (MPI_Request_free): Open MPI 4.1 can withdraw neither (MPI_Cancel of a send is a no-op
  // in its ob1 layer, measured: the request never completes), and waiting for it would wait for
  // the peer. After handed_over the library may still touch the buffer (should the peer come
  // back), so the caller must keep it alive. A collective cannot be abandoned: it waits.
  virtual Abandoned abandon() {
    return cancel() ? Abandoned::withdrawn : Abandoned::finished;
  }
};

// Move-only value. A default-constructed Work is already complete and ok. A Work must not outlive
// the communicator that started it. Destroying an unwaited Work waits for it (the buffers it
// uses must stay valid until then) and logs an error if it failed.
class [[nodiscard]] Work {
 public:
  Work() = default;
  explicit Work(std::unique_ptr<WorkImpl> impl) : impl_(std::move(impl)) {}
  static Work failed(Status s);
  Work(Work&&) noexcept = default;
  Work& operator=(Work&& other) noexcept;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  ~Work();

  Status wait();
  bool test();
  // See WorkImpl::cancel(); a complete Work returns false.
  bool cancel();
  // See WorkImpl::abandon(): handed_over means the library may still use the buffer (keep it
  // alive); afterwards the Work is complete and its destructor waits for nothing.
  Abandoned abandon();

 private:
  void finish_wait();
  std::unique_ptr<WorkImpl> impl_;
  Status status_;
};

}  // namespace tessera
