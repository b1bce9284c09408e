// The NCCL communicator (nccl_communicator.h).
#include "comm/nccl/nccl_communicator.h"

#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

namespace tessera {
namespace {

constexpr double kWaitTimeoutS = 60.0;  // as CommOptions::timeout_s: sized for slow first steps

Result<ncclDataType_t> reduction_type(DType dt) {
  switch (dt) {
    case DType::f32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
    case DType::i32: return ncclInt32;
    default: return invalid_argument("NCCL reductions take f32, bf16, f16 or i32");
  }
}

ncclRedOp_t reduction_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
    default: return ncclSum;
  }
}

bool is_collective(CollectiveKind k) { return !is_point_to_point(k); }

// An async op: the event recorded after it on the communicator's stream.
class NcclWork final : public WorkImpl {
 public:
  NcclWork(cudaEvent_t done, ncclComm_t comm, std::string what) : done_(done), comm_(comm), what_(std::move(what)) {}
  ~NcclWork() override { cudaEventDestroy(done_); }
  bool test() override {
    if (finished_) return true;
    const cudaError_t e = cudaEventQuery(done_);
    if (e == cudaErrorNotReady) return async_failed();
    finish(e == cudaSuccess ? Status() : comm_error(what_ + ": " + cudaGetErrorString(e)));
    return true;
  }
  Status wait() override {
    const auto t0 = std::chrono::steady_clock::now();
    while (!test()) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > kWaitTimeoutS) {
        finish(timeout_error(what_ + ": not finished after " + std::to_string(kWaitTimeoutS) +
                             " s (a peer missing from the collective?)"));
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return status_;
  }

 private:
  bool async_failed() {  // NCCL reports a peer's failure asynchronously
    ncclResult_t r = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &r) == ncclSuccess && r != ncclSuccess && r != ncclInProgress) {
      finish(comm_error(what_ + ": " + ncclGetErrorString(r)));
      return true;
    }
    return false;
  }
  void finish(Status s) {
    finished_ = true;
    status_ = std::move(s);
  }
  cudaEvent_t done_;
  ncclComm_t comm_;
  std::string what_;
  bool finished_ = false;
  Status status_;
};

}  // namespace

NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> bootstrap, Backend& device)
    : bootstrap_(std::move(bootstrap)), be_(device) {}

Result<std::unique_ptr<NcclCommunicator>> NcclCommunicator::create(std::unique_ptr<Communicator> bootstrap,
                                                                  Backend& device) {
  Communicator& b = *bootstrap;
  const std::string where = "NCCL communicator '" + b.name() + "' (rank " + std::to_string(b.rank()) + ")";
  if (device.device() != Device::cuda) return invalid_argument(where + ": needs the CUDA backend");
  // NCCL refuses two ranks of one communicator on one GPU: say so, with the way out.
  int ordinal = 0;
  char bus[32] = {};
  if (cudaGetDevice(&ordinal) != cudaSuccess || cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) != cudaSuccess)
    return comm_error(where + ": cannot read this rank's GPU");
  std::vector<char> buses(sizeof bus * static_cast<size_t>(b.size()));
  TS_RETURN_IF_ERROR(b.all_gather(bus, buses.data(), sizeof bus, DType::u8));
  for (int r = 0; r < b.size(); ++r)
    if (r != b.rank() && std::strncmp(bus, buses.data() + r * sizeof bus, sizeof bus) == 0)
      return invalid_argument(where + ": ranks " + std::to_string(std::min(r, b.rank())) + " and " +
                              std::to_string(std::max(r, b.rank())) + " share GPU " + bus +
                              "; NCCL needs one GPU per rank (CUDA_VISIBLE_DEVICES per local rank), or use the "
                              "staged communicator to share a GPU");
  ncclUniqueId id{};
  if (b.rank() == 0 && ncclGetUniqueId(&id) != ncclSuccess) return comm_error(where + ": ncclGetUniqueId failed");
  TS_RETURN_IF_ERROR(b.broadcast(&id, sizeof id, DType::u8, 0));
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator(std::move(bootstrap), device));
  if (const ncclResult_t r = ncclCommInitRank(&c->comm_, c->size(), id, c->rank()); r != ncclSuccess)
    return comm_error(where + ": ncclCommInitRank failed: " + ncclGetErrorString(r));
  if (cudaStreamCreateWithFlags(&c->stream_, cudaStreamNonBlocking) != cudaSuccess ||
      cudaMalloc(&c->barrier_word_, sizeof(int32_t)) != cudaSuccess ||
      cudaMemset(c->barrier_word_, 0, sizeof(int32_t)) != cudaSuccess)
    return comm_error(where + ": cannot create its stream");
  return c;
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_) {
    if (stream_) cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
  }
  if (stream_) cudaStreamDestroy(stream_);
  if (barrier_word_) cudaFree(barrier_word_);
}

void NcclCommunicator::abandon() {
  Communicator::abandon();
  if (comm_) ncclCommAbort(comm_);  // ends a collective whose peers will never come
  comm_ = nullptr;
  bootstrap_->abandon();
}

Status NcclCommunicator::failure(const CommOp& op, const std::string& what) const {
  return comm_error(std::string(collective_kind_name(op.kind)) + " #" + std::to_string(seq_) + " on communicator '" +
                    name() + "' (rank " + std::to_string(rank()) + ", NCCL): " + what);
}

Status NcclCommunicator::enqueue(const CommOp& op) {
  if (!comm_) return failure(op, "the communicator was abandoned");
  be_.synchronize();  // the backend's work on these buffers comes first
  const size_t elem = dtype_size(op.dtype);
  auto bytes = [&](int64_t n) { return static_cast<size_t>(n) * elem; };
  const char* send = static_cast<const char*>(op.send);
  char* recv = static_cast<char*>(op.recv);
  ncclResult_t r = ncclSuccess;
  switch (op.kind) {
    case CollectiveKind::all_reduce:
    case CollectiveKind::reduce_scatter: {
      TS_ASSIGN_OR_RETURN(const ncclDataType_t t, reduction_type(op.dtype));
      r = op.kind == CollectiveKind::all_reduce
              ? ncclAllReduce(op.send, op.recv, op.count, t, reduction_op(op.op), comm_, stream_)
              : ncclReduceScatter(op.send, op.recv, op.count, t, reduction_op(op.op), comm_, stream_);
      break;
    }
    // Data movement is bytes: every dtype, u16 included.
    case CollectiveKind::all_gather: r = ncclAllGather(op.send, op.recv, bytes(op.count), ncclUint8, comm_, stream_); break;
    case CollectiveKind::broadcast:
      r = ncclBroadcast(op.send, op.recv, bytes(op.count), ncclUint8, op.peer, comm_, stream_);
      break;
    case CollectiveKind::send: r = ncclSend(op.send, bytes(op.count), ncclUint8, op.peer, comm_, stream_); break;
    case CollectiveKind::recv: r = ncclRecv(op.recv, bytes(op.count), ncclUint8, op.peer, comm_, stream_); break;
    case CollectiveKind::all_to_all:
    case CollectiveKind::all_to_allv: {
      const bool v = op.kind == CollectiveKind::all_to_allv;
      int64_t at_send = 0, at_recv = 0;
      ncclGroupStart();
      for (int peer = 0; peer < size() && r == ncclSuccess; ++peer) {
        const int64_t ns = v ? op.send_counts[peer] : op.count, nr = v ? op.recv_counts[peer] : op.count;
        if (ns > 0) r = ncclSend(send + bytes(at_send), bytes(ns), ncclUint8, peer, comm_, stream_);
        if (nr > 0 && r == ncclSuccess) r = ncclRecv(recv + bytes(at_recv), bytes(nr), ncclUint8, peer, comm_, stream_);
        at_send += ns;
        at_recv += nr;
      }
      const ncclResult_t end = ncclGroupEnd();
      if (r == ncclSuccess) r = end;
      break;
    }
    case CollectiveKind::barrier:
      r = ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, comm_, stream_);
      break;
    default: return failure(op, "not an op of this communicator");
  }
  if (r != ncclSuccess) return failure(op, ncclGetErrorString(r));
  return Status();
}

Status NcclCommunicator::run(const CommOp& op) {
  if (is_collective(op.kind)) ++seq_;
  CollectiveRecord rec;
  rec.seq = seq_;
  rec.kind = op.kind;
  rec.peer = op.peer;
  rec.bytes = static_cast<size_t>(op.count) * dtype_size(op.dtype);
  const uint64_t ticket = log_.begin(rec);
  Status s = enqueue(op);
  if (s.ok()) {
    const cudaError_t e = cudaStreamSynchronize(stream_);
    ncclResult_t async = ncclSuccess;
    if (e != cudaSuccess) s = failure(op, cudaGetErrorString(e));
    else if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess) s = failure(op, ncclGetErrorString(async));
  }
  log_.finish(ticket, s.ok() ? OpState::done : OpState::failed);
  return s;
}

Work NcclCommunicator::start(const CommOp& op) {
  if (is_collective(op.kind)) ++seq_;
  Status s = enqueue(op);
  if (!s.ok()) return Work::failed(std::move(s));
  cudaEvent_t done = nullptr;
  if (cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess || cudaEventRecord(done, stream_) != cudaSuccess)
    return Work::failed(failure(op, "cannot record its completion event"));
  const std::string what = std::string(collective_kind_name(op.kind)) + " #" + std::to_string(seq_) +
                           " on communicator '" + name() + "' (rank " + std::to_string(rank()) + ", NCCL)";
  return Work(std::make_unique<NcclWork>(done, comm_, what));
}

Result<std::unique_ptr<Communicator>> NcclCommunicator::wrap(Result<std::unique_ptr<Communicator>> bootstrap) {
  if (!bootstrap.ok()) return bootstrap.status();
  if (!bootstrap.value()) return std::unique_ptr<Communicator>();  // this rank joined none
  auto c = create(std::move(bootstrap).value(), be_);
  if (!c.ok()) return c.status();
  return std::unique_ptr<Communicator>(std::move(c).value());
}

Result<std::unique_ptr<Communicator>> NcclCommunicator::split(int color, int key, const std::string& name) {
  return wrap(bootstrap_->split(color, key, name));
}

Result<std::unique_ptr<Communicator>> NcclCommunicator::without(const std::vector<int>& excluded,
                                                                const std::string& name) {
  return wrap(bootstrap_->without(excluded, name));
}

}  // namespace tessera
