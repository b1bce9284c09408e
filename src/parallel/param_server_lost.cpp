// A parameter server's dropped and lost workers (param_server.h): releasing a dropped worker's
// handles without waiting for it, the servers' agreement on the lost at the meeting steps, and the
// spares that take the lost workers' places.
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
  for (auto& link : spare_links_)
    if (link) link->abandon();
  spare_links_.clear();  // a link is point-to-point: freed without its spare
  if (spare_notices_) {
    bool handed_over = false;
    for (auto& sending : spare_notices_->sending)
      if (sending) handed_over |= sending->abandon() == Abandoned::handed_over;
    if (handed_over) (void)spare_notices_.release();  // MPI may still read them: kept
    spare_notices_.reset();
  }
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
    placeholder->world_rank = slot->world_rank;
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

std::vector<int> ParamServer::lost_workers() const { return lost_ranks(agreed_lost_); }

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
  uint64_t lost = agreed_lost_;  // a replaced slot is live again: its lost rank stays lost
  for (int w = 0; w < roles_.workers; ++w) {
    if (!dropped[static_cast<size_t>(w)]) continue;
    if (slots_[static_cast<size_t>(w)]->live) drop(w, "another parameter server dropped it");
    const int rank = slots_[static_cast<size_t>(w)]->world_rank;
    if (rank >= kMaxLosableWorkers)
      return comm_error("parameter server " + std::to_string(index_) + ": lost " + worker_name(w) + ", which the servers' answers cannot name (only world ranks below " +
                        std::to_string(kMaxLosableWorkers) + "); restart the job from its last checkpoint with --resume");
    lost |= uint64_t{1} << rank;
  }
  agreed_lost_ = lost;
  agreed_at_ = step;
  return Status::ok_status();
}

std::vector<std::pair<int, int>> ParamServer::plan_replacements() const {
  std::vector<std::pair<int, int>> out;
  int next = spares_used_;
  for (int w = 0; w < roles_.workers && next < roles_.spares; ++w) {
    const Slot& s = *slots_[static_cast<size_t>(w)];
    // Only the agreed lost: a worker this server dropped since may still be live on the others.
    if (!s.live && s.world_rank < kMaxLosableWorkers && (agreed_lost_ >> s.world_rank & 1)) out.emplace_back(w, next++);
  }
  return out;
}

Status ParamServer::notify_spares(int64_t step, const std::vector<std::pair<int, int>>& replacements, bool checkpoint,
                                  bool last) {
  if (!spare_notices_) return Status::ok_status();  // not server 0, or no spares
  for (int k = spares_used_; k < roles_.spares; ++k) {
    std::unique_ptr<Work>& sending = spare_notices_->sending[static_cast<size_t>(k)];
    if (sending) TS_RETURN_IF_ERROR(sending->wait());  // its previous notice (the spare read it long ago)
    SpareNotice& n = spare_notices_->message[static_cast<size_t>(k)];
    n = SpareNotice{step, agreed_lost_, -1, checkpoint ? 1 : 0, last ? 1 : 0};
    for (const auto& [w, spare] : replacements)
      if (spare == k) n.replaces = w;
    sending = std::make_unique<Work>(
        spare_links_[static_cast<size_t>(k)]->send_async(&n, sizeof(SpareNotice), DType::u8, 0, kSpareNoticeTag));
  }
  return Status::ok_status();
}

Status ParamServer::activate_spares(const std::vector<std::pair<int, int>>& replacements, int64_t step) {
  for (const auto& [w, k] : replacements) {
    const int lost_rank = slots_[static_cast<size_t>(w)]->world_rank;
    if (links_[static_cast<size_t>(w)]) (void)release(w);  // the lost worker's handles, waiting for nothing
    if (spare_notices_) {  // server 0: the spare's last notice must be out before its link changes hands
      std::unique_ptr<Work>& sending = spare_notices_->sending[static_cast<size_t>(k)];
      if (sending) TS_RETURN_IF_ERROR(sending->wait());
      sending.reset();
    }
    links_[static_cast<size_t>(w)] = std::move(spare_links_[static_cast<size_t>(k)]);
    std::unique_ptr<Slot> s = make_slot(roles_.position_of(w));
    s->world_rank = roles_.spare_world_rank(k);
    s->step = step;
    s->last_heard = ps_now_s();
    slots_[static_cast<size_t>(w)] = std::move(s);
    ++spares_used_;
    log_info("parameter server " + std::to_string(index_) + ": the spare at world rank " +
             std::to_string(roles_.spare_world_rank(k)) + " takes the place of worker " + std::to_string(w) +
             " (world rank " + std::to_string(lost_rank) + ", lost) after step " + std::to_string(step));
    TS_RETURN_IF_ERROR(answer(w));  // the current parameters; its next push is posted
  }
  return Status::ok_status();
}

}  // namespace tessera
