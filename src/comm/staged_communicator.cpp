// The staged path (staged_communicator.h): device -> host staging -> the host communicator -> device.
#include "comm/staged_communicator.h"

#include <cstdint>
#include <numeric>
#include <utility>

namespace tessera {
namespace {

// One op's host staging: where its input and output live on the host, and what to copy back.
struct Staging {
  std::vector<uint8_t> in, out;
  void* device_out = nullptr;  // the caller's output buffer (device memory)
  size_t out_bytes = 0;
};

int64_t sum(const int64_t* counts, int n) { return counts ? std::accumulate(counts, counts + n, int64_t{0}) : 0; }

// Elements the op reads from `send` and writes to `recv` (communicator.h's table).
std::pair<int64_t, int64_t> element_counts(const CommOp& op, int size) {
  switch (op.kind) {
    case CollectiveKind::all_reduce: return {op.count, op.count};
    case CollectiveKind::reduce_scatter: return {op.count * size, op.count};
    case CollectiveKind::all_gather: return {op.count, op.count * size};
    case CollectiveKind::all_to_all: return {op.count * size, op.count * size};
    case CollectiveKind::all_to_allv: return {sum(op.send_counts, size), sum(op.recv_counts, size)};
    case CollectiveKind::broadcast: return {op.count, op.count};
    case CollectiveKind::send: return {op.count, 0};
    case CollectiveKind::recv: return {0, op.count};
    default: return {0, 0};
  }
}

// Copies the op's device input to the host and points a copy of the op at the staging buffers; host
// buffers (control traffic, or one side of an op) are used as they are.
CommOp stage_in(const CommOp& op, int size, Backend& be, Staging& s) {
  const bool send_on_device = op.send && be.is_device_memory(op.send);
  const bool recv_on_device = op.recv && be.is_device_memory(op.recv);
  if (!send_on_device && !recv_on_device) return op;
  const auto [n_in, n_out] = element_counts(op, size);
  const size_t elem = dtype_size(op.dtype);
  CommOp h = op;
  if (send_on_device) {
    s.in.resize(static_cast<size_t>(n_in) * elem);
    if (!s.in.empty()) be.copy_to_host(s.in.data(), op.send, s.in.size());
    h.send = s.in.data();
  }
  if (recv_on_device && n_out > 0) {
    s.out_bytes = static_cast<size_t>(n_out) * elem;
    s.device_out = op.recv;
    if (op.recv == op.send) {  // in place (all-reduce, broadcast): one host buffer
      h.recv = s.in.data();
    } else {
      s.out.resize(s.out_bytes);
      h.recv = s.out.data();
    }
  } else if (recv_on_device) {
    h.recv = nullptr;  // nothing comes back (a zero-size op)
  }
  return h;
}

void stage_out(Backend& be, Staging& s) {
  if (s.device_out == nullptr || s.out_bytes == 0) return;
  be.copy_to_device(s.device_out, s.out.empty() ? s.in.data() : s.out.data(), s.out_bytes);
  s.device_out = nullptr;
}

// The host op through the inner communicator's public interface (its checks run again: cheap).
Status run_on(Communicator& c, const CommOp& h) {
  switch (h.kind) {
    case CollectiveKind::all_reduce: return c.all_reduce(h.send, h.recv, h.count, h.dtype, h.op);
    case CollectiveKind::reduce_scatter: return c.reduce_scatter(h.send, h.recv, h.count, h.dtype, h.op);
    case CollectiveKind::all_gather: return c.all_gather(h.send, h.recv, h.count, h.dtype);
    case CollectiveKind::all_to_all: return c.all_to_all(h.send, h.recv, h.count, h.dtype);
    case CollectiveKind::all_to_allv: return c.all_to_allv(h.send, h.send_counts, h.recv, h.recv_counts, h.dtype);
    case CollectiveKind::broadcast: return c.broadcast(h.recv, h.count, h.dtype, h.peer);
    case CollectiveKind::send: return c.send(h.send, h.count, h.dtype, h.peer, h.tag);
    case CollectiveKind::recv: return c.recv(h.recv, h.count, h.dtype, h.peer, h.tag);
    case CollectiveKind::barrier: return c.barrier();
    default: return internal_error("staged communicator: no such op");
  }
}
Work start_on(Communicator& c, const CommOp& h) {
  switch (h.kind) {
    case CollectiveKind::all_reduce: return c.all_reduce_async(h.send, h.recv, h.count, h.dtype, h.op);
    case CollectiveKind::reduce_scatter: return c.reduce_scatter_async(h.send, h.recv, h.count, h.dtype, h.op);
    case CollectiveKind::all_gather: return c.all_gather_async(h.send, h.recv, h.count, h.dtype);
    case CollectiveKind::all_to_all: return c.all_to_all_async(h.send, h.recv, h.count, h.dtype);
    case CollectiveKind::all_to_allv:
      return c.all_to_allv_async(h.send, h.send_counts, h.recv, h.recv_counts, h.dtype);
    case CollectiveKind::broadcast: return c.broadcast_async(h.recv, h.count, h.dtype, h.peer);
    case CollectiveKind::send: return c.send_async(h.send, h.count, h.dtype, h.peer, h.tag);
    case CollectiveKind::recv: return c.recv_async(h.recv, h.count, h.dtype, h.peer, h.tag);
    case CollectiveKind::barrier: return c.barrier_async();
    default: return Work::failed(internal_error("staged communicator: no such op"));
  }
}

// An op in flight: the inner op's handle and its staging, copied back to the device when it ends.
class StagedWork final : public WorkImpl {
 public:
  StagedWork(Work inner, std::unique_ptr<Staging> s, Backend& be) : inner_(std::move(inner)), s_(std::move(s)), be_(be) {}
  bool test() override {
    if (!inner_.test()) return false;
    finish(inner_.wait());
    return true;
  }
  Status wait() override {
    finish(inner_.wait());
    return status_;
  }
  bool cancel() override { return inner_.cancel(); }  // a withdrawn receive brought nothing back
  Abandoned abandon() override {
    const Abandoned a = inner_.abandon();
    if (a == Abandoned::handed_over) s_.release();  // the library may still write the staging: keep it
    return a;
  }

 private:
  void finish(Status s) {
    if (done_) return;
    done_ = true;
    status_ = std::move(s);
    if (status_.ok()) stage_out(be_, *s_);
  }
  Work inner_;
  std::unique_ptr<Staging> s_;
  Backend& be_;
  bool done_ = false;
  Status status_;
};

}  // namespace

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> host, Backend& device)
    : host_(std::move(host)), be_(device) {}

void StagedCommunicator::abandon() {
  Communicator::abandon();
  host_->abandon();
}

Status StagedCommunicator::run(const CommOp& op) {
  Staging s;
  const CommOp h = stage_in(op, size(), be_, s);
  TS_RETURN_IF_ERROR(run_on(*host_, h));
  stage_out(be_, s);
  return Status();
}

Work StagedCommunicator::start(const CommOp& op) {
  auto s = std::make_unique<Staging>();
  const CommOp h = stage_in(op, size(), be_, *s);
  Work inner = start_on(*host_, h);
  return Work(std::make_unique<StagedWork>(std::move(inner), std::move(s), be_));
}

Result<std::unique_ptr<Communicator>> StagedCommunicator::wrap(Result<std::unique_ptr<Communicator>> inner) {
  if (!inner.ok()) return inner.status();
  if (!inner.value()) return std::unique_ptr<Communicator>();  // this rank joined none
  return std::unique_ptr<Communicator>(std::make_unique<StagedCommunicator>(std::move(inner).value(), be_));
}

Result<std::unique_ptr<Communicator>> StagedCommunicator::split(int color, int key, const std::string& name) {
  return wrap(host_->split(color, key, name));
}
Result<std::unique_ptr<Communicator>> StagedCommunicator::without(const std::vector<int>& excluded,
                                                                  const std::string& name) {
  return wrap(host_->without(excluded, name));
}
Result<std::unique_ptr<Communicator>> StagedCommunicator::split_point_to_point(int color, int key,
                                                                               const std::string& name) {
  return wrap(host_->split_point_to_point(color, key, name));
}

}  // namespace tessera
