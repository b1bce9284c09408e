// Communicator front end: argument validation and the Tensor overloads, shared by all backends.
#include "comm/communicator.h"

#include <algorithm>
#include <climits>

namespace tessera {

namespace {
bool reducible(DType dt) {
  return dt == DType::f32 || dt == DType::bf16 || dt == DType::f16 || dt == DType::i32;
}
}  // namespace

Status Communicator::validate(const CommOp& op) const {
  std::string where = std::string(collective_kind_name(op.kind)) + " on communicator '" + name() + "' (rank " +
                      std::to_string(rank()) + "/" + std::to_string(size()) + "): ";
  if (abandoned_) return invalid_argument(where + "the communicator was abandoned on an error path; end the job");
  if (op.kind == CollectiveKind::barrier) return Status();
  if (op.kind == CollectiveKind::all_to_allv) {
    if (op.send_counts == nullptr || op.recv_counts == nullptr)
      return invalid_argument(where + "needs send_counts and recv_counts, " + std::to_string(size()) + " elements each");
    int64_t sent = 0, received = 0;
    for (int r = 0; r < size(); ++r) {
      if (op.send_counts[r] < 0 || op.recv_counts[r] < 0)
        return invalid_argument(where + "negative element count for rank " + std::to_string(r));
      sent += op.send_counts[r];
      received += op.recv_counts[r];
    }
    if (sent > INT_MAX || received > INT_MAX)
      return invalid_argument(where + std::to_string(std::max(sent, received)) +
                              " elements exceed the 2^31-1 per call that MPI counts allow; split the exchange");
    if ((sent > 0 && op.send == nullptr) || (received > 0 && op.recv == nullptr))
      return invalid_argument(where + "null buffer for " + std::to_string(sent > 0 && !op.send ? sent : received) +
                              " elements");
    return Status();
  }
  if (op.count < 0) return invalid_argument(where + "negative element count " + std::to_string(op.count));
  int64_t total = op.count;
  const bool blocked = op.kind == CollectiveKind::reduce_scatter || op.kind == CollectiveKind::all_gather ||
                       op.kind == CollectiveKind::all_to_all;
  if (blocked) total *= size();
  if (total > INT_MAX)
    return invalid_argument(where + std::to_string(total) + " elements exceed the 2^31-1 per call that MPI counts " +
                            "allow; split the buffer into several calls");
  bool reduces = op.kind == CollectiveKind::all_reduce || op.kind == CollectiveKind::reduce_scatter;
  if (reduces && !reducible(op.dtype))
    return invalid_argument(where + "cannot reduce dtype " + std::string(dtype_name(op.dtype)) +
                            "; reductions support f32, bf16, f16, i32");
  if (reduces && op.op == ReduceOp::avg && op.dtype == DType::i32)
    return invalid_argument(where + "avg of i32 would truncate; reduce with sum and divide where needed");
  if ((op.kind == CollectiveKind::broadcast || is_point_to_point(op.kind)) && (op.peer < 0 || op.peer >= size()))
    return invalid_argument(where + "rank " + std::to_string(op.peer) + " is outside this communicator of size " +
                            std::to_string(size()));
  if (is_point_to_point(op.kind) && op.tag < 0) return invalid_argument(where + "tags must be >= 0");
  if (op.count > 0 && ((op.send == nullptr && op.kind != CollectiveKind::recv && op.kind != CollectiveKind::broadcast) ||
                       (op.recv == nullptr && op.kind != CollectiveKind::send)))
    return invalid_argument(where + "null buffer for " + std::to_string(op.count) + " elements");
  return Status();
}

void Communicator::count_traffic(const CommOp& op) {
  const double p = size(), bytes = static_cast<double>(op.count) * static_cast<double>(dtype_size(op.dtype));
  double wire = 0;
  switch (op.kind) {
    case CollectiveKind::all_reduce: wire = 2 * (p - 1) / p * bytes; break;
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_gather:
    case CollectiveKind::all_to_all: wire = (p - 1) * bytes; break;  // count is one rank's block
    case CollectiveKind::all_to_allv:  // what leaves this rank
      wire = bytes - static_cast<double>(op.send_counts[rank()]) * static_cast<double>(dtype_size(op.dtype));
      break;
    case CollectiveKind::broadcast:
    case CollectiveKind::send: wire = p > 1 ? bytes : 0; break;
    default: break;
  }
  traffic_bytes_ += static_cast<uint64_t>(wire);
}

Status Communicator::run_checked(const CommOp& op) {
  TS_RETURN_IF_ERROR(validate(op));
  count_traffic(op);
  return run(op);
}

Work Communicator::start_checked(const CommOp& op) {
  Status s = validate(op);
  if (!s.ok()) return Work::failed(std::move(s));
  count_traffic(op);
  return start(op);
}

static CommOp make_op(CollectiveKind k, const void* s, void* r, int64_t n, DType dt, ReduceOp op = ReduceOp::sum,
                      int peer = -1, int tag = 0) {
  return CommOp{k, s, r, n, dt, op, peer, tag};
}

Status Communicator::all_reduce(const void* s, void* r, int64_t n, DType dt, ReduceOp op) {
  return run_checked(make_op(CollectiveKind::all_reduce, s, r, n, dt, op));
}
Work Communicator::all_reduce_async(const void* s, void* r, int64_t n, DType dt, ReduceOp op) {
  return start_checked(make_op(CollectiveKind::all_reduce, s, r, n, dt, op));
}
Status Communicator::reduce_scatter(const void* s, void* r, int64_t n, DType dt, ReduceOp op) {
  return run_checked(make_op(CollectiveKind::reduce_scatter, s, r, n, dt, op));
}
Work Communicator::reduce_scatter_async(const void* s, void* r, int64_t n, DType dt, ReduceOp op) {
  return start_checked(make_op(CollectiveKind::reduce_scatter, s, r, n, dt, op));
}
Status Communicator::all_gather(const void* s, void* r, int64_t n, DType dt) {
  return run_checked(make_op(CollectiveKind::all_gather, s, r, n, dt));
}
Work Communicator::all_gather_async(const void* s, void* r, int64_t n, DType dt) {
  return start_checked(make_op(CollectiveKind::all_gather, s, r, n, dt));
}
Status Communicator::all_to_all(const void* s, void* r, int64_t n, DType dt) {
  return run_checked(make_op(CollectiveKind::all_to_all, s, r, n, dt));
}
Work Communicator::all_to_all_async(const void* s, void* r, int64_t n, DType dt) {
  return start_checked(make_op(CollectiveKind::all_to_all, s, r, n, dt));
}
static CommOp make_all_to_allv(const void* s, const int64_t* sc, void* r, const int64_t* rc, DType dt, int size) {
  CommOp op = make_op(CollectiveKind::all_to_allv, s, r, 0, dt);
  op.send_counts = sc;
  op.recv_counts = rc;
  for (int i = 0; sc && i < size; ++i) op.count += sc[i];
  return op;
}
Status Communicator::all_to_allv(const void* s, const int64_t* sc, void* r, const int64_t* rc, DType dt) {
  return run_checked(make_all_to_allv(s, sc, r, rc, dt, size()));
}
Work Communicator::all_to_allv_async(const void* s, const int64_t* sc, void* r, const int64_t* rc, DType dt) {
  return start_checked(make_all_to_allv(s, sc, r, rc, dt, size()));
}
Status Communicator::broadcast(void* buf, int64_t n, DType dt, int root) {
  return run_checked(make_op(CollectiveKind::broadcast, buf, buf, n, dt, ReduceOp::sum, root));
}
Work Communicator::broadcast_async(void* buf, int64_t n, DType dt, int root) {
  return start_checked(make_op(CollectiveKind::broadcast, buf, buf, n, dt, ReduceOp::sum, root));
}
Status Communicator::send(const void* buf, int64_t n, DType dt, int peer, int tag) {
  return run_checked(make_op(CollectiveKind::send, buf, nullptr, n, dt, ReduceOp::sum, peer, tag));
}
Work Communicator::send_async(const void* buf, int64_t n, DType dt, int peer, int tag) {
  return start_checked(make_op(CollectiveKind::send, buf, nullptr, n, dt, ReduceOp::sum, peer, tag));
}
Status Communicator::recv(void* buf, int64_t n, DType dt, int peer, int tag) {
  return run_checked(make_op(CollectiveKind::recv, nullptr, buf, n, dt, ReduceOp::sum, peer, tag));
}
Work Communicator::recv_async(void* buf, int64_t n, DType dt, int peer, int tag) {
  return start_checked(make_op(CollectiveKind::recv, nullptr, buf, n, dt, ReduceOp::sum, peer, tag));
}
Status Communicator::barrier() { return run_checked(make_op(CollectiveKind::barrier, nullptr, nullptr, 0, DType::u8)); }
Work Communicator::barrier_async() { return start_checked(make_op(CollectiveKind::barrier, nullptr, nullptr, 0, DType::u8)); }

// --- tensors ---

Status Communicator::validate_tensors(CollectiveKind kind, const Tensor& in, const Tensor& out,
                                      int64_t in_mult, int64_t out_mult) const {
  std::string where = std::string(collective_kind_name(kind)) + " on communicator '" + name() + "': ";
  if (in.device != device() || out.device != device())
    return invalid_argument(where + "tensors must live on the communicator's device (MPI: cpu; device " +
                            "tensors need the NCCL communicator)");
  if (in.dtype != out.dtype)
    return invalid_argument(where + "input is " + std::string(dtype_name(in.dtype)) + " but output is " +
                            std::string(dtype_name(out.dtype)));
  if (in.numel() * in_mult != out.numel() * out_mult)
    return invalid_argument(where + "shapes " + shape_to_string(in.shape) + " and " + shape_to_string(out.shape) +
                            " do not fit a communicator of size " + std::to_string(size()));
  return Status();
}

Status Communicator::all_reduce(const Tensor& t, ReduceOp op) {
  TS_RETURN_IF_ERROR(validate_tensors(CollectiveKind::all_reduce, t, t, 1, 1));
  return all_reduce(t.data, t.data, t.numel(), t.dtype, op);
}
Work Communicator::all_reduce_async(const Tensor& t, ReduceOp op) {
  Status s = validate_tensors(CollectiveKind::all_reduce, t, t, 1, 1);
  if (!s.ok()) return Work::failed(s);
  return all_reduce_async(t.data, t.data, t.numel(), t.dtype, op);
}
Status Communicator::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
  TS_RETURN_IF_ERROR(validate_tensors(CollectiveKind::reduce_scatter, in, out, 1, size()));
  return reduce_scatter(in.data, out.data, out.numel(), out.dtype, op);
}
Work Communicator::reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op) {
  Status s = validate_tensors(CollectiveKind::reduce_scatter, in, out, 1, size());
  if (!s.ok()) return Work::failed(s);
  return reduce_scatter_async(in.data, out.data, out.numel(), out.dtype, op);
}
Status Communicator::all_gather(const Tensor& in, const Tensor& out) {
  TS_RETURN_IF_ERROR(validate_tensors(CollectiveKind::all_gather, in, out, size(), 1));
  return all_gather(in.data, out.data, in.numel(), in.dtype);
}
Work Communicator::all_gather_async(const Tensor& in, const Tensor& out) {
  Status s = validate_tensors(CollectiveKind::all_gather, in, out, size(), 1);
  if (!s.ok()) return Work::failed(s);
  return all_gather_async(in.data, out.data, in.numel(), in.dtype);
}
Status Communicator::broadcast(const Tensor& t, int root) {
  TS_RETURN_IF_ERROR(validate_tensors(CollectiveKind::broadcast, t, t, 1, 1));
  return broadcast(t.data, t.numel(), t.dtype, root);
}
Work Communicator::broadcast_async(const Tensor& t, int root) {
  Status s = validate_tensors(CollectiveKind::broadcast, t, t, 1, 1);
  if (!s.ok()) return Work::failed(s);
  return broadcast_async(t.data, t.numel(), t.dtype, root);
}
Status Communicator::send(const Tensor& t, int peer, int tag) {
  TS_RETURN_IF_ERROR(validate_tensors(CollectiveKind::send, t, t, 1, 1));
  return send(t.data, t.numel(), t.dtype, peer, tag);
}
Status Communicator::recv(const Tensor& t, int peer, int tag) {
  TS_RETURN_IF_ERROR(validate_tensors(CollectiveKind::recv, t, t, 1, 1));
  return recv(t.data, t.numel(), t.dtype, peer, tag);
}

}  // namespace tessera
