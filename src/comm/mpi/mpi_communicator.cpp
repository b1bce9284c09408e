// MPI communicator: direct blocking calls, polled async ops with timeouts, diagnosis of laggards.
#include "comm/mpi/mpi_communicator.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/log.h"

namespace tessera {

namespace {

size_t op_bytes(const CommOp& op, int size) {
  size_t b = static_cast<size_t>(op.count) * dtype_size(op.dtype);
  if (op.kind == CollectiveKind::reduce_scatter || op.kind == CollectiveKind::all_gather ||
      op.kind == CollectiveKind::all_to_all)
    b *= size;
  return b;
}

// all_to_allv's MPI arguments: send counts, send displacements, receive counts, receive
// displacements (size each, in that order), from the op's int64 counts (validated <= INT_MAX in total).
std::vector<int> alltoallv_args(const CommOp& op, int size) {
  std::vector<int> v(4 * static_cast<size_t>(size));
  int sd = 0, rd = 0;
  for (int r = 0; r < size; ++r) {
    v[r] = static_cast<int>(op.send_counts[r]);
    v[size + r] = sd;
    v[2 * size + r] = static_cast<int>(op.recv_counts[r]);
    v[3 * size + r] = rd;
    sd += v[r];
    rd += v[2 * size + r];
  }
  return v;
}

std::string ranks_list(const std::vector<int>& r) {
  std::string s = "[";
  for (size_t i = 0; i < r.size(); ++i) s += (i ? ", " : "") + std::to_string(r[i]);
  return s + "]";
}

}  // namespace

// One in-flight op. Polls MPI_Test; past the deadline it turns into a timeout Status.
class MpiWork final : public WorkImpl {
 public:
  // args: what MPI reads until the op completes (all_to_allv's counts and displacements).
  MpiWork(MpiCommunicator* comm, const CommOp& op, uint64_t seq, uint64_t ticket, MPI_Request req,
          std::vector<int> args = {})
      : comm_(comm), op_(op), seq_(seq), ticket_(ticket), req_(req), args_(std::move(args)),
        start_s_(steady_seconds()) {}

  bool test() override {
    if (finished_) return true;
    int flag = 0;
    int err = MPI_Test(&req_, &flag, MPI_STATUS_IGNORE);
    if (err != MPI_SUCCESS) {
      comm_->log_.finish(ticket_, OpState::failed);
      return finish(comm_->mpi_failure(op_, seq_, err));
    }
    if (flag) {
      comm_->post_process(op_);
      comm_->log_.finish(ticket_, OpState::done);
      return finish(Status());
    }
    double timeout = comm_->options_.timeout_s;
    if (timeout > 0) {
      double now = steady_seconds();
      if (first_poll_s_ == 0) first_poll_s_ = now;
      // The op may have sat unpolled (MPI only progresses inside calls) while the caller computed:
      // give it a short stretch of real polling before calling it stuck.
      double grace = timeout < 1.0 ? timeout : 1.0;
      if (now - start_s_ > timeout && now - first_poll_s_ >= grace) {
        comm_->log_.finish(ticket_, OpState::timed_out);
        return finish(comm_->timeout_failure(op_, seq_, now - start_s_));
      }
    }
    return false;
  }

  bool cancel() override {
    if (finished_) return false;
    MPI_Cancel(&req_);
    MPI_Status st;
    MPI_Wait(&req_, &st);  // a cancelled receive completes at once
    int cancelled = 0;
    MPI_Test_cancelled(&st, &cancelled);
    if (!cancelled) {  // it had matched a message: an ordinary completion
      comm_->post_process(op_);
      comm_->log_.finish(ticket_, OpState::done);
      finish(Status());
      return false;
    }
    comm_->log_.finish(ticket_, OpState::cancelled);
    finish(Status());
    return true;
  }

  // MPI_Cancel withdraws a receive nothing has matched at once; a send (Open MPI 4.1 ignores
  // MPI_Cancel of one) or a receive already matched completes only with its peer's help. So: cancel
  // a receive, poll briefly, and what is still unfinished goes to MPI_Request_free, which returns at
  // once (MPI drops the request when, if ever, it completes). Raw MPI_Test, not test(): an op past
  // the timeout is no error here. A collective cannot be abandoned: it waits, as cancel() does.
  Abandoned abandon() override {
    if (finished_) return Abandoned::finished;
    if (!is_point_to_point(op_.kind)) return (void)wait(), Abandoned::finished;
    if (op_.kind == CollectiveKind::recv) MPI_Cancel(&req_);
    MPI_Status st;
    int flag = 0, err = MPI_SUCCESS;
    const double until = steady_seconds() + 0.02;
    while ((err = MPI_Test(&req_, &flag, &st)) == MPI_SUCCESS && !flag && steady_seconds() < until)
      std::this_thread::yield();
    if (err != MPI_SUCCESS || flag) {
      int cancelled = 0;
      if (err == MPI_SUCCESS) MPI_Test_cancelled(&st, &cancelled);
      comm_->log_.finish(ticket_, err != MPI_SUCCESS ? OpState::failed : cancelled ? OpState::cancelled : OpState::done);
      finish(Status());
      return cancelled ? Abandoned::withdrawn : Abandoned::finished;
    }
    if (req_ != MPI_REQUEST_NULL) MPI_Request_free(&req_);
    comm_->log_.finish(ticket_, OpState::released);
    finish(Status());
    return Abandoned::handed_over;
  }

  Status wait() override {
    // Yield first (short ops finish within microseconds), then sleep briefly: under
    // oversubscription a spinning rank would steal the core its peer needs.
    int polls = 0;
    while (!test()) {
      if (++polls < 200)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(polls < 2000 ? 20 : 200));
    }
    return status_;
  }

 private:
  bool finish(Status s) {
    status_ = std::move(s);
    finished_ = true;
    return true;
  }
  MpiCommunicator* comm_;
  CommOp op_;
  uint64_t seq_, ticket_;
  MPI_Request req_;
  std::vector<int> args_;
  double start_s_, first_poll_s_ = 0;
  bool finished_ = false;
  Status status_;
};

Result<std::unique_ptr<MpiCommunicator>> MpiCommunicator::create_world(const CommOptions& options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return internal_error("MpiCommunicator::create_world: MPI is not initialised; create an MpiRuntime first");
  MPI_Comm comm;
  int err = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (err != MPI_SUCCESS) return comm_error("MPI_Comm_dup(MPI_COMM_WORLD) failed");
  // Collective: every rank pins in-place all-reduces or none does (their schedules must match). A
  // world of one never pins (nothing crosses a link) and skips MPI_T's start-up, which registers
  // every MCA component's variables (~0.2 s).
  int size = 1;
  MPI_Comm_size(comm, &size);
  std::shared_ptr<LibnbcAllreduceKnob> knob =
      size > 1 ? LibnbcAllreduceKnob::create() : LibnbcAllreduceKnob::unusable("a world of one pins nothing");
  knob->agree(comm);
  return std::unique_ptr<MpiCommunicator>(
      new MpiCommunicator(comm, "world", options, std::make_shared<MpiReduceOps>(), std::move(knob)));
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name, const CommOptions& options,
                                 std::shared_ptr<MpiReduceOps> ops, std::shared_ptr<LibnbcAllreduceKnob> knob,
                                 bool heartbeat)
    : comm_(comm), name_(std::move(name)), options_(options),
      log_(static_cast<size_t>(options.history > 0 ? options.history : 1)), ops_(std::move(ops)),
      knob_(std::move(knob)) {
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  // World ranks, so that messages from a sub-communicator name processes the user can find.
  MPI_Group group, world_group;
  MPI_Comm_group(comm_, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  std::vector<int> mine(size_);
  for (int i = 0; i < size_; ++i) mine[i] = i;
  world_ranks_.resize(size_);
  MPI_Group_translate_ranks(group, size_, mine.data(), world_group, world_ranks_.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  if (!heartbeat) return;  // point to point only (split_point_to_point)
  board_ = HeartbeatBoard::create(comm_);
  if (!board_) log_warn("communicator '" + name_ + "': no heartbeat window; timeouts cannot name missing ranks");
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // Freeing the window synchronises with peers that may never come (after a timeout, or when this
  // rank abandons the communicator on an error path): skip that call, the job is ending and takes
  // the window with it. Everything local is freed; MPI_Comm_free is local (pending ops complete
  // or die with the job).
  if ((!broken_.empty() || abandoned()) && board_) board_->leak_on_destroy();
  board_.reset();
  MPI_Comm_free(&comm_);
}

std::string MpiCommunicator::label(const CommOp& op, uint64_t seq) const {
  std::string s = std::string(collective_kind_name(op.kind)) + " #" + std::to_string(seq);
  if (op.kind == CollectiveKind::send) s += " to rank " + std::to_string(op.peer);
  if (op.kind == CollectiveKind::recv) s += " from rank " + std::to_string(op.peer);
  if (op.kind == CollectiveKind::broadcast) s += " (root " + std::to_string(op.peer) + ")";
  return s + " on communicator '" + name_ + "' (rank " + std::to_string(rank_) + "/" + std::to_string(size_) +
         ", world rank " + std::to_string(world_ranks_[rank_]) + ")";
}

MpiCommunicator::Begun MpiCommunicator::begin(const CommOp& op, NbcAllreduceAlg alg) {
  uint64_t seq;
  if (is_point_to_point(op.kind)) {
    seq = ++p2p_seq_;
  } else {
    seq = ++seq_;
    if (board_) board_->post(seq, op.kind);
  }
  CollectiveRecord rec;
  rec.seq = seq;
  rec.kind = op.kind;
  rec.peer = op.peer;
  rec.bytes = op_bytes(op, size_);
  if (alg != NbcAllreduceAlg::library) rec.algorithm = nbc_allreduce_alg_name(alg);
  return Begun{seq, log_.begin(rec)};
}

int MpiCommunicator::call_blocking(const CommOp& op) {
  MPI_Datatype dt = mpi_datatype(op.dtype);
  int n = static_cast<int>(op.count);
  switch (op.kind) {
    case CollectiveKind::all_reduce:
      return MPI_Allreduce(op.send == op.recv ? MPI_IN_PLACE : op.send, op.recv, n, dt, ops_->get(op.dtype, op.op), comm_);
    case CollectiveKind::reduce_scatter:
      return MPI_Reduce_scatter_block(op.send == op.recv ? MPI_IN_PLACE : op.send, op.recv, n, dt,
                                      ops_->get(op.dtype, op.op), comm_);
    case CollectiveKind::all_gather: {
      bool in_place = op.send == static_cast<char*>(op.recv) + static_cast<size_t>(rank_) * n * dtype_size(op.dtype);
      return MPI_Allgather(in_place ? MPI_IN_PLACE : op.send, n, dt, op.recv, n, dt, comm_);
    }
    case CollectiveKind::all_to_all: return MPI_Alltoall(op.send, n, dt, op.recv, n, dt, comm_);
    case CollectiveKind::all_to_allv: {
      const std::vector<int> a = alltoallv_args(op, size_);
      const int* v = a.data();
      return MPI_Alltoallv(op.send, v, v + size_, dt, op.recv, v + 2 * size_, v + 3 * size_, dt, comm_);
    }
    case CollectiveKind::broadcast: return MPI_Bcast(op.recv, n, dt, op.peer, comm_);
    case CollectiveKind::barrier: return MPI_Barrier(comm_);
    case CollectiveKind::send: return MPI_Send(op.send, n, dt, op.peer, op.tag, comm_);
    case CollectiveKind::recv: return MPI_Recv(op.recv, n, dt, op.peer, op.tag, comm_, MPI_STATUS_IGNORE);
    default: return MPI_ERR_OP;
  }
}

NbcAllreduceAlg MpiCommunicator::async_pin(const CommOp& op) const {
  if (op.kind != CollectiveKind::all_reduce || !knob_->usable()) return NbcAllreduceAlg::library;
  int commutative = 0;
  MPI_Op_commutative(ops_->get(op.dtype, op.op), &commutative);
  return allreduce_pin(size_, op.count, dtype_size(op.dtype), commutative != 0, op.send == op.recv);
}

int MpiCommunicator::call_nonblocking(const CommOp& op, NbcAllreduceAlg alg, MPI_Request* req,
                                      const std::vector<int>& args) {
  MPI_Datatype dt = mpi_datatype(op.dtype);
  int n = static_cast<int>(op.count);
  switch (op.kind) {
    case CollectiveKind::all_reduce:
      return knob_->call(alg, [&] {
        return MPI_Iallreduce(op.send == op.recv ? MPI_IN_PLACE : op.send, op.recv, n, dt, ops_->get(op.dtype, op.op),
                              comm_, req);
      });
    case CollectiveKind::reduce_scatter:
      return MPI_Ireduce_scatter_block(op.send == op.recv ? MPI_IN_PLACE : op.send, op.recv, n, dt,
                                       ops_->get(op.dtype, op.op), comm_, req);
    case CollectiveKind::all_gather: {
      bool in_place = op.send == static_cast<char*>(op.recv) + static_cast<size_t>(rank_) * n * dtype_size(op.dtype);
      return MPI_Iallgather(in_place ? MPI_IN_PLACE : op.send, n, dt, op.recv, n, dt, comm_, req);
    }
    case CollectiveKind::all_to_all: return MPI_Ialltoall(op.send, n, dt, op.recv, n, dt, comm_, req);
    case CollectiveKind::all_to_allv: {
      const int* v = args.data();
      return MPI_Ialltoallv(op.send, v, v + size_, dt, op.recv, v + 2 * size_, v + 3 * size_, dt, comm_, req);
    }
    case CollectiveKind::broadcast: return MPI_Ibcast(op.recv, n, dt, op.peer, comm_, req);
    case CollectiveKind::barrier: return MPI_Ibarrier(comm_, req);
    case CollectiveKind::send: return MPI_Isend(op.send, n, dt, op.peer, op.tag, comm_, req);
    case CollectiveKind::recv: return MPI_Irecv(op.recv, n, dt, op.peer, op.tag, comm_, req);
    default: return MPI_ERR_OP;
  }
}

void MpiCommunicator::post_process(const CommOp& op) {
  if (op.op != ReduceOp::avg) return;
  if (op.kind == CollectiveKind::all_reduce || op.kind == CollectiveKind::reduce_scatter)
    divide_in_place(op.recv, op.count, op.dtype, size_);
}

Status MpiCommunicator::run(const CommOp& op) {
  if (!broken_.empty()) return comm_error(std::string(collective_kind_name(op.kind)) + ": " + broken_);
  if (options_.watch_blocking) return start(op).wait();
  Begun b = begin(op);
  int err = call_blocking(op);
  if (err != MPI_SUCCESS) {
    log_.finish(b.ticket, OpState::failed);
    return mpi_failure(op, b.seq, err);
  }
  post_process(op);
  log_.finish(b.ticket, OpState::done);
  return Status();
}

Work MpiCommunicator::start(const CommOp& op) {
  if (!broken_.empty()) return Work::failed(comm_error(std::string(collective_kind_name(op.kind)) + ": " + broken_));
  const NbcAllreduceAlg alg = async_pin(op);
  Begun b = begin(op, alg);
  MPI_Request req = MPI_REQUEST_NULL;
  std::vector<int> args;  // moved into the Work: MPI reads it until the op completes
  if (op.kind == CollectiveKind::all_to_allv) args = alltoallv_args(op, size_);
  int err = call_nonblocking(op, alg, &req, args);
  if (err != MPI_SUCCESS) {
    log_.finish(b.ticket, OpState::failed);
    return Work::failed(mpi_failure(op, b.seq, err));
  }
  return Work(std::make_unique<MpiWork>(this, op, b.seq, b.ticket, req, std::move(args)));
}

Status MpiCommunicator::mpi_failure(const CommOp& op, uint64_t seq, int err) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(err, msg, &len);
  return comm_error(label(op, seq) + " failed: MPI error: " + std::string(msg, len) +
                    " (mismatched counts or dtypes across ranks truncate messages; check that every rank passes the "
                    "same sizes)");
}

std::string MpiCommunicator::describe_peers(const CommOp& op, uint64_t seq) {
  if (!board_ && is_point_to_point(op.kind))
    return "check that rank " + std::to_string(op.peer) + " (world rank " + std::to_string(world_ranks_[op.peer]) +
           ") is alive and posts the matching " + (op.kind == CollectiveKind::send ? "recv" : "send") + " with tag " +
           std::to_string(op.tag);
  if (!board_) return "peers' progress unknown (no heartbeat window)";
  std::vector<std::optional<Heartbeat>> beats = board_->read_all(0.5);
  auto world = [&](int r) { return std::to_string(world_ranks_[r]); };
  auto entered = [&](const Heartbeat& h) {
    return h.seq == 0 ? std::string("no collective yet")
                      : std::string(collective_kind_name(h.kind)) + " #" + std::to_string(h.seq);
  };
  if (is_point_to_point(op.kind)) {
    const auto& h = beats[op.peer];
    return "rank " + std::to_string(op.peer) + " (world rank " + world(op.peer) + ") last entered " +
           (h ? entered(*h) : std::string("<unknown: its heartbeat could not be read>")) +
           " on this communicator; check that it posts the matching " +
           (op.kind == CollectiveKind::send ? "recv" : "send") + " with tag " + std::to_string(op.tag);
  }
  std::vector<int> missing, unknown;
  std::string details, mismatched;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    if (!beats[r]) {
      unknown.push_back(r);
    } else if (beats[r]->seq < seq) {
      missing.push_back(r);
      details += "; rank " + std::to_string(r) + " (world rank " + world(r) + ") last entered " + entered(*beats[r]);
    } else if (beats[r]->seq == seq && beats[r]->kind != op.kind) {
      mismatched += "; rank " + std::to_string(r) + " entered #" + std::to_string(seq) + " as " +
                    std::string(collective_kind_name(beats[r]->kind)) + " (ranks issue collectives in different orders)";
    }
  }
  std::string s;
  if (!missing.empty())
    s = "ranks " + ranks_list(missing) + " did not arrive" + details;
  else
    s = "every rank entered it (the op is slow or MPI is stuck)";
  if (!unknown.empty()) s += "; ranks " + ranks_list(unknown) + " did not answer the heartbeat read";
  return s + mismatched;
}

Status MpiCommunicator::timeout_failure(const CommOp& op, uint64_t seq, double waited_s) {
  char waited[32];
  std::snprintf(waited, sizeof waited, "%.1f", waited_s);
  std::string msg = label(op, seq) + " timed out after " + waited + " s: " + describe_peers(op, seq) +
                    ". The communicator is unusable now; end the job with abort_job(). If the op is legitimately "
                    "this slow, raise CommOptions::timeout_s.";
  broken_ = "communicator '" + name_ + "' is unusable after " + label(op, seq) + " timed out; end the job with abort_job()";
  log_error(msg + "\nrecent ops on '" + name_ + "':\n" + log_.format());
  return timeout_error(msg);
}

Result<std::unique_ptr<Communicator>> MpiCommunicator::split(int color, int key, const std::string& name) {
  return split_with(color, key, name, /*heartbeat=*/true);
}

Result<std::unique_ptr<Communicator>> MpiCommunicator::without(const std::vector<int>& excluded, const std::string& name) {
  CommOp op;
  op.kind = CollectiveKind::split;
  if (!broken_.empty()) return comm_error("without: " + broken_);
  for (int r : excluded)
    if (r < 0 || r >= size_ || r == rank_)
      return invalid_argument("without: rank " + std::to_string(r) + " cannot be excluded by rank " + std::to_string(rank_) +
                              " of '" + name_ + "' (size " + std::to_string(size_) + ")");
  MPI_Group all, kept;
  MPI_Comm_group(comm_, &all);
  MPI_Group_excl(all, static_cast<int>(excluded.size()), excluded.data(), &kept);
  MPI_Comm sub = MPI_COMM_NULL;
  // Not a collective of this communicator (the excluded take no part): no sequence number, no heartbeat.
  const int err = MPI_Comm_create_group(comm_, kept, /*tag=*/7301, &sub);
  MPI_Group_free(&kept);
  MPI_Group_free(&all);
  if (err != MPI_SUCCESS) return mpi_failure(op, seq_, err);
  return std::unique_ptr<Communicator>(new MpiCommunicator(sub, name_ + "/" + name, options_, ops_, knob_, true));
}

Result<std::unique_ptr<Communicator>> MpiCommunicator::split_point_to_point(int color, int key, const std::string& name) {
  return split_with(color, key, name, /*heartbeat=*/false);
}

Result<std::unique_ptr<Communicator>> MpiCommunicator::split_with(int color, int key, const std::string& name,
                                                                  bool heartbeat) {
  CommOp op;
  op.kind = CollectiveKind::split;
  if (!broken_.empty()) return comm_error("split: " + broken_);
  Begun b = begin(op);
  MPI_Comm sub = MPI_COMM_NULL;
  int err = MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub);
  if (err != MPI_SUCCESS) {
    log_.finish(b.ticket, OpState::failed);
    return mpi_failure(op, b.seq, err);
  }
  log_.finish(b.ticket, OpState::done);
  if (sub == MPI_COMM_NULL) return std::unique_ptr<Communicator>();
  return std::unique_ptr<Communicator>(new MpiCommunicator(sub, name_ + "/" + name, options_, ops_, knob_, heartbeat));
}

}  // namespace tessera
