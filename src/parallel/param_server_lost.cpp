// A parameter server's dropped and lost workers (param_server.h): releasing a dropped worker's
// handles without waiting for it, and the servers' agreement on the lost at the meeting steps.
#include <string>

#include "core/log.h"
#include "parallel/param_server_stop.h"
#include "parallel/param_server_state.h"

namespace tessera {

std::vector<ReleasedWorker> ParamServer::release_dropped_workers() {
  std::vector<ReleasedWorker> out;
  for (int w = 0; w < roles_.workers; ++w)
    if (!slots_[static_cast<size_t>(w)]->live && links_[static_cast<size_t>(w)]) out.push_back(release(w));
  return out;
}

// The error path: every worker's handles and the stop agreement's, waiting for nothing.
std::pair<std::vector<ReleasedWorker>, int64_t> ParamServer::abandon_exchange() {
  std::vector<ReleasedWorker> out;
  for (int w = 0; w < roles_.workers; ++w)
    if (links_[static_cast<size_t>(w)]) out.push_back(release(w, slots_[static_cast<size_t>(w)]->live ? "" : "dropped "));
  int64_t agreement_kept = 0;
  if (stop_agreement_) {
    if (stop_agreement_->abandon() > 0) {
      // MPI may still use the agreement's buffers (a decision or request it never received): kept.
      agreement_kept = stop_agreement_->bytes();
      (void)stop_agreement_.release();
    }
    stop_agreement_.reset();
  }
  return {std::move(out), agreement_kept};
}

// Destroying a dropped (or, on the error path, any) worker's Works would wait for it (a Work's
// destructor waits: its buffers must outlive the op), possibly for ever; so each is withdrawn or
// handed over first.
ReleasedWorker ParamServer::release(int w, const char* what) {
  const double t0 = ps_now_s();
  std::unique_ptr<Slot>& slot = slots_[static_cast<size_t>(w)];
  std::unique_ptr<Communicator>& link = links_[static_cast<size_t>(w)];
  ReleasedWorker r;
  r.worker = w;
  auto abandon = [&r](std::unique_ptr<Work>& work) {
    const Abandoned a = work ? work->abandon() : Abandoned::finished;
    r.receives_withdrawn += a == Abandoned::withdrawn;
    r.handed_over += a == Abandoned::handed_over;
    work.reset();
  };
  abandon(slot->recv_header);
  for (auto& work : slot->recv_data) abandon(work);
  abandon(slot->send_header);
  for (auto& work : slot->send_data) abandon(work);
  for (const CollectiveRecord& op : link->recent_ops()) r.ops_left_running += op.state == OpState::running;
  link->abandon();
  link.reset();
  if (r.handed_over > 0) {
    // MPI may still use those buffers (should the worker come back before the job ends): the slot
    // that holds them is kept for the rest of the process, not freed.
    for (const auto* vs : {&slot->out, &slot->grads})
      for (const auto& v : *vs) r.bytes_kept += static_cast<int64_t>(v.size() * sizeof(float));
    for (const auto& v : slot->wire) r.bytes_kept += static_cast<int64_t>(v.size());
    r.bytes_kept += static_cast<int64_t>(sizeof(Slot));
    auto placeholder = std::make_unique<Slot>();
    placeholder->position = slot->position;
    placeholder->live = false;
    placeholder->step = slot->step;
    (void)slot.release();
    slot = std::move(placeholder);
  }
  log_info("parameter server " + std::to_string(index_) + ": released " + what + worker_name(w) + ": " +
           std::to_string(r.receives_withdrawn) + " receive(s) withdrawn, " + std::to_string(r.handed_over) +
           " unfinished message(s) handed to MPI (" + std::to_string(r.bytes_kept) + " bytes kept), " +
           std::to_string(r.ops_left_running) + " op(s) left running, link freed in " +
           std::to_string(ps_now_s() - t0) + " s");
  return r;
}

std::vector<int> ParamServer::lost_workers() const {
  std::vector<int> out;
  for (int w = 0; w < roles_.workers && w < kMaxLosableWorkers; ++w)
    if (agreed_lost_ >> w & 1) out.push_back(w);  // worker w is world rank w
  return out;
}

bool ParamServer::meets_at(int64_t step) const {
  if (o_.consistency == PsConsistency::sync) return false;  // every step is a meeting
  return o_.meet_at ? o_.meet_at(step) : o_.checkpoint_at(step);
}

// Async modes, before the first answer to meeting step `step`: the servers agree on the dropped
// workers (a worker any server dropped is dropped by all; its pushes here are simply not answered).
Status ParamServer::agree_on_lost(int64_t step) {
  std::vector<int32_t> dropped(static_cast<size_t>(roles_.workers));
  for (int w = 0; w < roles_.workers; ++w) dropped[static_cast<size_t>(w)] = !slots_[static_cast<size_t>(w)]->live;
  if (servers_.size() > 1) {
    const Status st = servers_.all_reduce_async(dropped.data(), dropped.data(), roles_.workers, DType::i32, ReduceOp::max).wait();
    if (!st.ok()) return Status(st.code(), "parameter servers agreeing on the lost workers at step " + std::to_string(step) + ": " + st.message());
  }
  uint64_t lost = 0;
  for (int w = 0; w < roles_.workers; ++w) {
    if (!dropped[static_cast<size_t>(w)]) continue;
    if (slots_[static_cast<size_t>(w)]->live) drop(w, "another parameter server dropped it");
    if (w >= kMaxLosableWorkers)
      return comm_error("parameter server " + std::to_string(index_) + ": lost " + worker_name(w) + ", which the servers' answers cannot name (only the first " +
                        std::to_string(kMaxLosableWorkers) + " workers); restart the job from its last checkpoint with --resume");
    lost |= uint64_t{1} << w;
  }
  agreed_lost_ = lost;
  agreed_at_ = step;
  return Status::ok_status();
}

}  // namespace tessera
