// The server side of the parameter server: polled per-worker receives, sync / async / ssp updates.
#include "parallel/param_server.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "core/log.h"
#include "parallel/param_server_replica.h"
#include "parallel/param_server_state.h"
#include "parallel/param_server_stop.h"

namespace tessera {


namespace {
// [0, range) minus the tensors the norm does not count: a whole range when every tensor counts,
// so a plain data-parallel run sums its squares exactly as before.
std::vector<FlatRange> counted_parts(const ParamLayout& layout, FlatRange range) {
  std::vector<FlatRange> out{{0, range.numel()}};
  for (const ParamInfo& p : layout.params()) {
    if (counts_towards_norm(layout, p)) continue;
    const int64_t lo = std::max(p.offset, range.begin) - range.begin;
    const int64_t hi = std::min(p.offset + p.numel, range.end) - range.begin;
    if (hi <= lo) continue;
    std::vector<FlatRange> cut;
    for (const FlatRange& r : out) {
      if (r.begin < lo) cut.push_back({r.begin, std::min(r.end, lo)});
      if (r.end > hi) cut.push_back({std::max(r.begin, hi), r.end});
    }
    out = std::move(cut);
  }
  return out;
}
}  // namespace

ParamServer::ParamServer(Backend& backend, const PsRoles& roles, int index, Communicator& servers,
                         std::vector<std::unique_ptr<Communicator>> links,
                         std::vector<std::vector<ParamStore*>> positions, const AdamWConfig& optim,
                         const CompressionConfig& compression)
    : backend_(backend), roles_(roles), index_(index), servers_(servers), links_(std::move(links)) {
  if (compression.kind != CompressionKind::none) compressor_ = make_compressor(backend, compression);
  for (const std::vector<ParamStore*>& chunks : positions) {
    units_.emplace_back();
    int64_t bytes = 0;
    for (ParamStore* store : chunks) {
      auto u = std::make_unique<Unit>(backend, *store, roles.shard(index, store->numel()), optim);
      u->counted = counted_parts(store->layout(), u->range);
      bytes += compressor_ ? compressor_->payload_bytes(u->range.numel())
                           : u->range.numel() * static_cast<int64_t>(sizeof(float));
      units_.back().push_back(std::move(u));
    }
    push_bytes_.push_back(bytes);
  }
  for (int w = 0; w < roles_.workers; ++w) {
    slots_.push_back(make_slot(roles_.position_of(w)));
    slots_.back()->world_rank = w;
  }
  for (int k = 0; k < roles_.spares; ++k) spare_links_.push_back(std::move(links_.at(static_cast<size_t>(roles_.workers + k))));
  links_.resize(static_cast<size_t>(roles_.workers));
  if (index_ == 0 && roles_.spares > 0) {
    spare_notices_ = std::make_unique<SpareNotices>();
    spare_notices_->message.resize(static_cast<size_t>(roles_.spares));
    spare_notices_->sending.resize(static_cast<size_t>(roles_.spares));
  }
}

std::unique_ptr<ParamServer::Slot> ParamServer::make_slot(int position) const {
  auto s = std::make_unique<Slot>();
  s->position = position;
  for (const auto& u : units_.at(static_cast<size_t>(position))) {
    const auto n = static_cast<size_t>(u->range.numel());
    s->grads.emplace_back(n);
    if (compressor_) s->wire.emplace_back(static_cast<size_t>(compressor_->payload_bytes(u->range.numel())));
    s->out.emplace_back(n);
  }
  s->recv_data.resize(s->grads.size());
  s->send_data.resize(s->grads.size());
  return s;
}

ParamServer::~ParamServer() {
  (void)release_dropped_workers();
  if (log_) std::fclose(log_);
}

std::vector<OwnedState> ParamServer::owned_state() {
  std::vector<OwnedState> out;
  for (const auto& chunks : units_)
    for (const auto& u : chunks) out.push_back({static_cast<int>(out.size()), &u->opt, u->range});
  return out;
}

Status ParamServer::not_a_worker() {
  return internal_error("a parameter-server rank takes no training steps (a bug: the trainer must run serve())");
}

std::string ParamServer::worker_name(int w) const {
  return "worker " + std::to_string(w) + " (world rank " + std::to_string(slots_[static_cast<size_t>(w)]->world_rank) + ")";
}

int ParamServer::live_workers() const {
  int n = 0;
  for (const auto& s : slots_) n += s->live;
  return n;
}

int64_t ParamServer::slowest() const {
  int64_t m = INT64_MAX;
  for (const auto& s : slots_)
    if (s->live) m = std::min(m, s->step);
  return m == INT64_MAX ? 0 : m;
}

// The updates a position's shards have taken (its chunks step together).
int64_t ParamServer::version_of(int position) const {
  return units_[static_cast<size_t>(position)].front()->opt.steps_taken();
}

void ParamServer::post(int w) {
  Slot& s = *slots_[static_cast<size_t>(w)];
  Communicator& link = *links_[static_cast<size_t>(w)];
  s.recv_header = std::make_unique<Work>(link.recv_async(&s.push, sizeof(PushHeader), DType::u8, 0, kPushHeaderTag));
  for (size_t c = 0; c < s.grads.size(); ++c)
    s.recv_data[c] = std::make_unique<Work>(
        compressor_ ? link.recv_async(s.wire[c].data(), static_cast<int64_t>(s.wire[c].size()), DType::u8, 0, kPushDataTag)
                    : link.recv_async(s.grads[c].data(), static_cast<int64_t>(s.grads[c].size()), DType::f32, 0,
                                      kPushDataTag));
  s.posted = true;
}

// true once worker w's posted push has fully arrived; an error names the worker.
Result<bool> ParamServer::poll(int w) {
  Slot& s = *slots_[static_cast<size_t>(w)];
  if (!s.recv_header->test()) return false;
  for (auto& work : s.recv_data)
    if (!work->test()) return false;
  s.posted = false;
  std::vector<Work*> works{s.recv_header.get()};
  for (auto& work : s.recv_data) works.push_back(work.get());
  for (Work* work : works) {
    Status st = work->wait();  // already complete: returns its status
    if (!st.ok())
      return Status(st.code(), "parameter server " + std::to_string(index_) + ": the push of " + worker_name(w) +
                                   " after its step " + std::to_string(s.step) + " failed: " + st.message());
  }
  const int64_t expected = push_bytes_[static_cast<size_t>(s.position)];
  if (s.push.payload_bytes != expected)
    return internal_error("parameter server " + std::to_string(index_) + ": " + worker_name(w) + " pushed " +
                          std::to_string(s.push.payload_bytes) + " bytes where " + std::to_string(expected) +
                          " were expected (workers and servers built different models or compressors?)");
  if (compressor_)  // decompressed once, here: the sync average and the async update read `grads`
    for (size_t c = 0; c < s.grads.size(); ++c) {
      std::fill(s.grads[c].begin(), s.grads[c].end(), 0.f);
      compressor_->accumulate(s.wire[c].data(), static_cast<int64_t>(s.grads[c].size()), 1.f, s.grads[c].data());
    }
  ++s.step;
  s.last_heard = ps_now_s();
  return true;
}

// sync: the stop signal of `step` -- the largest that a live worker pushed or this server received,
// agreed over the servers, so every server and (through the answers) every worker stops after it.
// A signal during the last step lets the run end as planned.
Status ParamServer::agree_on_stop(int64_t step) {
  int32_t sig = o_.stop_requested ? static_cast<int32_t>(o_.stop_requested()) : 0;
  for (const auto& s : slots_)
    if (s->live) sig = std::max(sig, static_cast<int32_t>(s->push.stop_signal));
  if (servers_.size() > 1) {
    const Status st = servers_.all_reduce_async(&sig, &sig, 1, DType::i32, ReduceOp::max).wait();
    if (!st.ok()) return Status(st.code(), "parameter servers agreeing on a stop signal: " + st.message());
  }
  if (sig != 0 && step < o_.final_step) {
    stop_signal_ = sig;
    stopped_after_ = step;
  }
  return Status::ok_status();
}

// Async modes: one look at the stop agreement (param_server_stop.h). When a stop step becomes known
// here after this server answered a worker's push of that step, the receive it posted for the next
// push is withdrawn (none will come), and the save of that step is due if it passed the step over.
Status ParamServer::follow_stop_agreement(int64_t newest, int64_t* checkpointed) {
  int pushed = 0;
  for (const auto& s : slots_)
    if (s->live) pushed = std::max(pushed, static_cast<int>(s->push.stop_signal));
  const int own = o_.stop_requested ? o_.stop_requested() : 0;
  TS_ASSIGN_OR_RETURN(const bool stop, stop_agreement_->poll(own, pushed, newest, o_.final_step));
  if (!stop) return Status::ok_status();
  stop_signal_ = stop_agreement_->signal();
  stopped_after_ = stop_agreement_->stop_after();
  for (int w = 0; w < roles_.workers; ++w) {
    Slot& s = *slots_[static_cast<size_t>(w)];
    if (s.step > stopped_after_)
      return internal_error("parameter server " + std::to_string(index_) + ": " + worker_name(w) + " pushed step " +
                            std::to_string(s.step) + " past the agreed stop step " + std::to_string(stopped_after_) +
                            " (a bug in the stop agreement)");
    if (s.live && s.posted && s.step == stopped_after_) {
      (void)s.recv_header->cancel();
      for (auto& work : s.recv_data) (void)work->cancel();
      s.posted = false;
    }
  }
  if (*checkpointed >= stopped_after_ && !o_.checkpoint_at(stopped_after_)) *checkpointed = stopped_after_ - 1;
  return Status::ok_status();
}

// The step every worker stops after: the planned last one, or the agreed preemption step.
int64_t ParamServer::last_step() const { return stopped_after_ > 0 ? stopped_after_ : o_.final_step; }

// Async modes: worker w's push applied to its position's shards at once.
void ParamServer::apply_push(int w, float lr) {
  Slot& s = *slots_[static_cast<size_t>(w)];
  const auto& chunks = units_[static_cast<size_t>(s.position)];
  for (size_t c = 0; c < chunks.size(); ++c) chunks[c]->opt.step_with_range_grads(chunks[c]->store.params(), s.grads[c].data(), lr);
}

// Averages each position's live workers' pushes of this step in worker order, clips by the global
// norm and applies.
Status ParamServer::apply_sync_step() {
  double total = 0;
  for (size_t p = 0; p < units_.size(); ++p) {
    int members = 0;
    for (const auto& s : slots_) members += s->live && s->position == static_cast<int>(p);
    for (size_t c = 0; c < units_[p].size(); ++c) {
      Unit& u = *units_[p][c];
      const int64_t n = u.range.numel();
      u.sum.assign(static_cast<size_t>(n), 0.f);
      for (const auto& s : slots_) {
        if (!s->live || s->position != static_cast<int>(p)) continue;
        const float* g = s->grads[c].data();
        backend_.add(u.sum.data(), u.sum.data(), g, n);
      }
      if (members == 0) continue;  // (sync mode drops nobody: an error ends the run first)
      backend_.scale_inplace(u.sum.data(), n, 1.f / static_cast<float>(members));
      for (const FlatRange& r : u.counted) total += backend_.sum_of_squares(u.sum.data() + r.begin, r.numel());
    }
  }
  float sq = static_cast<float>(total);
  if (servers_.size() > 1) TS_RETURN_IF_ERROR(servers_.all_reduce_async(&sq, &sq, 1, DType::f32, ReduceOp::sum).wait());
  const double norm = std::sqrt(static_cast<double>(sq));
  TS_RETURN_IF_ERROR(agree_on_stop(slots_.front()->step));
  const bool clip = o_.grad_clip > 0 && norm > o_.grad_clip;
  last_norm_ = norm;
  const float lr = o_.lr(slots_.front()->step);
  for (auto& chunks : units_)
    for (auto& u : chunks) {
      if (clip) backend_.scale_inplace(u->sum.data(), u->range.numel(), static_cast<float>(o_.grad_clip / (norm + 1e-6)));
      u->opt.step_with_range_grads(u->store.params(), u->sum.data(), lr);
    }
  for (auto& s : slots_) {
    if (!s->live) continue;
    s->arrived = false;
    s->pending = true;
    s->applied_version = version_of(s->position);
  }
  return Status::ok_status();
}

bool ParamServer::may_answer(int w) const {
  const Slot& s = *slots_[static_cast<size_t>(w)];
  if (s.step >= last_step()) return slowest() >= last_step();  // everyone ends on the same parameters
  if (meets_at(s.step) && slowest() < s.step) return false;     // the workers meet after it: wait for all
  if (o_.consistency == PsConsistency::ssp) return s.step - slowest() <= o_.staleness;
  return true;
}

// Sends worker w its position's shards (copies) and, unless it is done, posts the receives of its next push.
Status ParamServer::answer(int w) {
  Slot& s = *slots_[static_cast<size_t>(w)];
  Communicator& link = *links_[static_cast<size_t>(w)];
  if (s.send_header) TS_RETURN_IF_ERROR(s.send_header->wait());
  for (auto& p : s.send_data)
    if (p) TS_RETURN_IF_ERROR(p->wait());
  const auto& chunks = units_[static_cast<size_t>(s.position)];
  s.reply = ReplyHeader{version_of(s.position), s.step, o_.consistency == PsConsistency::sync ? last_norm_ : 0.0,
                        stop_signal_, stopped_after_, agreed_lost_};
  s.send_header = std::make_unique<Work>(link.send_async(&s.reply, sizeof(ReplyHeader), DType::u8, 0, kReplyHeaderTag));
  for (size_t c = 0; c < chunks.size(); ++c) {
    const Unit& u = *chunks[c];
    std::copy_n(u.store.params() + u.range.begin, u.range.numel(), s.out[c].data());
    s.send_data[c] = std::make_unique<Work>(link.send_async(s.out[c].data(), u.range.numel(), DType::f32, 0, kReplyDataTag));
  }
  if (s.pending && log_) {
    std::fprintf(log_,
                 "{\"server\": %d, \"worker\": %d, \"step\": %lld, \"read_version\": %lld, \"applied_version\": %lld, "
                 "\"reply_version\": %lld, \"slowest\": %lld, \"t\": %.6f, \"world_rank\": %d}\n",
                 index_, w, (long long)s.step, (long long)s.push.read_version, (long long)s.applied_version,
                 (long long)s.reply.version, (long long)slowest(), ps_now_s() - t_start_, s.world_rank);
    std::fflush(log_);  // the job may end by abort_job (a dead peer): keep every record
  }
  s.pending = false;
  s.last_heard = ps_now_s();  // it waited for this answer (ssp, a meeting step): its silence starts now
  if (s.step < last_step()) post(w);
  return Status::ok_status();
}

void ParamServer::drop(int w, const std::string& why) {
  Slot& s = *slots_[static_cast<size_t>(w)];
  s.live = false;
  log_warn("parameter server " + std::to_string(index_) + ": dropping " + worker_name(w) + " after its step " +
           std::to_string(s.step) + " (" + why + "); continuing with " + std::to_string(live_workers()) + " worker(s)");
}

Status ParamServer::wait_sends() {
  for (auto& s : slots_) {
    if (!s->live) continue;
    if (s->send_header) TS_RETURN_IF_ERROR(s->send_header->wait());
    for (auto& p : s->send_data)
      if (p) TS_RETURN_IF_ERROR(p->wait());
  }
  return Status::ok_status();
}

Status ParamServer::broadcast_parameters() {
  for (int w = 0; w < roles_.workers; ++w) TS_RETURN_IF_ERROR(answer(w));  // pending = false: not logged
  return wait_sends();
}

Status ParamServer::serve(const ParamServerOptions& options) {
  o_ = options;
  t_start_ = ps_now_s();
  if (!o_.log_path.empty() && !log_) log_ = std::fopen(o_.log_path.c_str(), "a");
  for (auto& s : slots_) {
    s->step = o_.first_step;
    s->last_heard = t_start_;
  }
  if (o_.first_step >= o_.final_step) return Status::ok_status();  // a resumed run that was already complete
  if (o_.consistency != PsConsistency::sync)  // its receives are renewed well inside the communicator's timeout
    stop_agreement_ = std::make_unique<PsStopAgreement>(servers_, index_, o_.dead_after_s > 0 ? o_.dead_after_s / 2 : 10.0);
  for (int w = 0; w < roles_.workers; ++w) post(w);
  const bool sync = o_.consistency == PsConsistency::sync;
  int64_t checkpointed = o_.first_step;
  int64_t newest = o_.first_step;  // the highest step any worker has pushed
  int idle = 0;
  for (;;) {
    bool progress = false;
    for (int w = 0; w < roles_.workers; ++w) {
      Slot& s = *slots_[static_cast<size_t>(w)];
      if (!s.live || !s.posted) continue;
      Result<bool> got = poll(w);
      if (!got.ok()) {
        if (sync) return got.status();
        drop(w, got.status().message());
        continue;
      }
      if (!got.value()) continue;
      progress = true;
      if (s.step > newest) {
        newest = s.step;
        if (o_.on_step) TS_RETURN_IF_ERROR(o_.on_step(newest));
      }
      if (sync) {
        s.arrived = true;
      } else {
        apply_push(w, o_.lr(s.step));
        s.applied_version = version_of(s.position);
        s.pending = true;
      }
    }
    if (!sync) TS_RETURN_IF_ERROR(follow_stop_agreement(newest, &checkpointed));
    if (sync) {
      bool all = live_workers() > 0;
      for (const auto& s : slots_) all = all && (!s->live || s->arrived);
      if (all) {
        TS_RETURN_IF_ERROR(apply_sync_step());
        progress = true;
      }
    }
    for (int w = 0; w < roles_.workers; ++w) {
      Slot& s = *slots_[static_cast<size_t>(w)];
      if (s.live && s.pending && may_answer(w)) {
        if (meets_at(s.step) && agreed_at_ < s.step) {
          TS_RETURN_IF_ERROR(agree_on_lost(s.step));
          if (!s.live) continue;
        }
        TS_RETURN_IF_ERROR(answer(w));
        progress = true;
      }
    }
    // Every live worker answered at the same step: the workers may now be saving it (a world collective).
    bool level = live_workers() > 0;
    const int64_t lo = slowest();
    for (const auto& s : slots_) level = level && (!s->live || (s->step == lo && !s->pending));
    if (level && lo > checkpointed) {
      const bool lost_grew = agreed_at_ == lo && agreed_lost_ != announced_lost_ && o_.on_lost;
      const bool save = o_.checkpoint_at(lo) || lo == stopped_after_;
      const std::vector<std::pair<int, int>> replacements = lost_grew ? plan_replacements() : std::vector<std::pair<int, int>>{};
      // The standby spares first: they join the collectives below.
      if (lost_grew || save) TS_RETURN_IF_ERROR(notify_spares(lo, replacements, save, lo >= last_step()));
      if (lost_grew) {  // before the workers' collectives
        TS_RETURN_IF_ERROR(o_.on_lost(lost_workers()));
        announced_lost_ = agreed_lost_;
        TS_RETURN_IF_ERROR(activate_spares(replacements, lo));
      }
      if (save) {
        TS_RETURN_IF_ERROR(wait_sends());
        TS_RETURN_IF_ERROR(o_.checkpoint(lo, lo >= last_step()));
        for (auto& s : slots_) s->last_heard = ps_now_s();
      }
      checkpointed = lo;
    }
    if (checkpointed >= last_step()) break;
    if (live_workers() == 0) return comm_error("parameter server " + std::to_string(index_) + ": every worker was dropped");
    if (!sync && o_.dead_after_s > 0) {
      const double now = ps_now_s();
      for (int w = 0; w < roles_.workers; ++w) {
        Slot& s = *slots_[static_cast<size_t>(w)];
        // A worker waiting for this server's answer, or saving a checkpoint its peers have not reached, is not silent.
        const bool waiting_for_us = s.pending || (s.step > checkpointed && o_.checkpoint_at(s.step));
        if (s.live && !waiting_for_us && s.step < last_step() && now - s.last_heard > o_.dead_after_s)
          drop(w, "sent nothing for " + std::to_string(static_cast<int>(now - s.last_heard)) + " s");
      }
    }
    if (progress) {
      idle = 0;
    } else if (++idle < 64) {
      std::this_thread::yield();
    } else {  // sleep, not spin: workers on the same cores need them
      std::this_thread::sleep_for(std::chrono::microseconds(idle < 1000 ? 50 : 500));
    }
  }
  if (log_) std::fflush(log_);
  if (stop_agreement_) TS_RETURN_IF_ERROR(stop_agreement_->finish());
  if (spare_notices_)
    for (auto& sending : spare_notices_->sending)
      if (sending) TS_RETURN_IF_ERROR(sending->wait());
  return wait_sends();
}

}  // namespace tessera
