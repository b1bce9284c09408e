// The server side of the parameter server: polled per-worker receives, sync / async / ssp updates.
#include "parallel/param_server.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "backend/ops.h"
#include "core/log.h"

namespace tessera {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// A Work (or communicator) of a dropped worker may never complete: destroying it would wait forever.
template <typename T>
void leak(std::unique_ptr<T>& p) {
  (void)p.release();
}
}  // namespace

// What the server keeps per worker.
struct ParamServer::Slot {
  bool live = true;
  bool posted = false;   // the receives of the next push are posted
  bool arrived = false;  // sync: its push of the current step is in `grads`
  bool pending = false;  // its push is applied (sync: averaged) but not yet answered
  int64_t step = 0;      // steps it has completed (pushed)
  PushHeader push;
  std::vector<float> grads;  // the received gradient range
  std::vector<uint8_t> wire;  // the received compressed push (with a compressor)
  std::unique_ptr<Work> recv_header, recv_data;
  int64_t applied_version = 0;  // this server's version once its push was applied
  double last_heard = 0;
  ReplyHeader reply;
  std::vector<float> out;  // the parameters of the answer (a copy: later pushes change the shard)
  std::unique_ptr<Work> send_header, send_data;
};

ParamServer::ParamServer(const PsRoles& roles, int index, Communicator& servers,
                         std::vector<std::unique_ptr<Communicator>> links, ParamStore& store,
                         const AdamWConfig& optim, const CompressionConfig& compression)
    : roles_(roles), index_(index), servers_(servers), links_(std::move(links)), store_(store),
      range_(roles.shard(index, store.numel())), opt_(store.layout(), optim, range_.begin, range_.end) {
  push_bytes_ = range_.numel() * static_cast<int64_t>(sizeof(float));
  if (compression.kind != CompressionKind::none) {
    compressor_ = make_compressor(compression);
    push_bytes_ = compressor_->payload_bytes(range_.numel());
  }
  for (int w = 0; w < roles_.workers; ++w) {
    auto s = std::make_unique<Slot>();
    s->grads.resize(static_cast<size_t>(range_.numel()));
    if (compressor_) s->wire.resize(static_cast<size_t>(push_bytes_));
    s->out.resize(static_cast<size_t>(range_.numel()));
    slots_.push_back(std::move(s));
  }
}

ParamServer::~ParamServer() {
  for (size_t w = 0; w < slots_.size(); ++w) {
    Slot& s = *slots_[w];
    if (s.live) continue;
    for (auto* p : {&s.recv_header, &s.recv_data, &s.send_header, &s.send_data}) leak(*p);
    leak(links_[w]);
  }
  if (log_) std::fclose(log_);
}

Status ParamServer::not_a_worker() {
  return internal_error("a parameter-server rank takes no training steps (a bug: the trainer must run serve())");
}

std::string ParamServer::worker_name(int w) const { return "worker " + std::to_string(w) + " (world rank " + std::to_string(w) + ")"; }

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

void ParamServer::post(int w) {
  Slot& s = *slots_[static_cast<size_t>(w)];
  Communicator& link = *links_[static_cast<size_t>(w)];
  s.recv_header = std::make_unique<Work>(link.recv_async(&s.push, sizeof(PushHeader), DType::u8, 0, kPushHeaderTag));
  s.recv_data = std::make_unique<Work>(
      compressor_ ? link.recv_async(s.wire.data(), push_bytes_, DType::u8, 0, kPushDataTag)
                  : link.recv_async(s.grads.data(), range_.numel(), DType::f32, 0, kPushDataTag));
  s.posted = true;
}

// true once worker w's posted push has fully arrived; an error names the worker.
Result<bool> ParamServer::poll(int w) {
  Slot& s = *slots_[static_cast<size_t>(w)];
  if (!s.recv_header->test() || !s.recv_data->test()) return false;
  s.posted = false;
  for (Work* work : {s.recv_header.get(), s.recv_data.get()}) {
    Status st = work->wait();  // already complete: returns its status
    if (!st.ok())
      return Status(st.code(), "parameter server " + std::to_string(index_) + ": the push of " + worker_name(w) +
                                   " after its step " + std::to_string(s.step) + " failed: " + st.message());
  }
  if (s.push.payload_bytes != push_bytes_)
    return internal_error("parameter server " + std::to_string(index_) + ": " + worker_name(w) + " pushed " +
                          std::to_string(s.push.payload_bytes) + " bytes where " + std::to_string(push_bytes_) +
                          " were expected (workers and servers built different models or compressors?)");
  if (compressor_) {  // decompressed once, here: the sync average and the async update read `grads`
    std::fill(s.grads.begin(), s.grads.end(), 0.f);
    compressor_->accumulate(s.wire.data(), range_.numel(), 1.f, s.grads.data());
  }
  ++s.step;
  s.last_heard = now_s();
  return true;
}

void ParamServer::apply(const float* grads, float lr) { opt_.step_with_range_grads(store_.params(), grads, lr); }

// Averages the live workers' pushes of this step in worker order, clips by the global norm and applies.
Status ParamServer::apply_sync_step() {
  const int64_t n = range_.numel();
  const int workers = live_workers();
  sum_.assign(static_cast<size_t>(n), 0.f);
  for (const auto& s : slots_) {
    if (!s->live) continue;
    const float* g = s->grads.data();
    float* acc = sum_.data();
    for (int64_t i = 0; i < n; ++i) acc[i] += g[i];
  }
  ops::scale_inplace(sum_.data(), n, 1.f / static_cast<float>(workers));
  float sq = static_cast<float>(ops::sum_of_squares(sum_.data(), n));
  if (servers_.size() > 1) TS_RETURN_IF_ERROR(servers_.all_reduce_async(&sq, &sq, 1, DType::f32, ReduceOp::sum).wait());
  const double norm = std::sqrt(static_cast<double>(sq));
  if (o_.grad_clip > 0 && norm > o_.grad_clip)
    ops::scale_inplace(sum_.data(), n, static_cast<float>(o_.grad_clip / (norm + 1e-6)));
  last_norm_ = norm;
  apply(sum_.data(), o_.lr(slots_.front()->step));
  for (auto& s : slots_) {
    if (!s->live) continue;
    s->arrived = false;
    s->pending = true;
    s->applied_version = opt_.steps_taken();
  }
  return Status::ok_status();
}

bool ParamServer::may_answer(int w) const {
  const Slot& s = *slots_[static_cast<size_t>(w)];
  if (s.step >= o_.final_step) return slowest() >= o_.final_step;  // everyone ends on the same parameters
  if (o_.consistency == PsConsistency::ssp) return s.step - slowest() <= o_.staleness;
  return true;
}

// Sends worker w the shard (a copy) and, unless it is done, posts the receives of its next push.
Status ParamServer::answer(int w) {
  Slot& s = *slots_[static_cast<size_t>(w)];
  Communicator& link = *links_[static_cast<size_t>(w)];
  for (auto* p : {&s.send_header, &s.send_data})
    if (*p) TS_RETURN_IF_ERROR((*p)->wait());
  std::copy_n(store_.params() + range_.begin, range_.numel(), s.out.data());
  s.reply = ReplyHeader{opt_.steps_taken(), s.step, o_.consistency == PsConsistency::sync ? last_norm_ : 0.0, 0};
  s.send_header = std::make_unique<Work>(link.send_async(&s.reply, sizeof(ReplyHeader), DType::u8, 0, kReplyHeaderTag));
  s.send_data = std::make_unique<Work>(link.send_async(s.out.data(), range_.numel(), DType::f32, 0, kReplyDataTag));
  if (s.pending && log_) {
    std::fprintf(log_,
                 "{\"server\": %d, \"worker\": %d, \"step\": %lld, \"read_version\": %lld, \"applied_version\": %lld, "
                 "\"reply_version\": %lld, \"slowest\": %lld, \"t\": %.6f}\n",
                 index_, w, (long long)s.step, (long long)s.push.read_version, (long long)s.applied_version,
                 (long long)s.reply.version, (long long)slowest(), now_s() - t_start_);
    std::fflush(log_);  // the job may end by abort_job (a dead peer): keep every record
  }
  s.pending = false;
  if (s.step < o_.final_step) post(w);
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
    for (auto* p : {&s->send_header, &s->send_data})
      if (*p) TS_RETURN_IF_ERROR((*p)->wait());
  }
  return Status::ok_status();
}

Status ParamServer::broadcast_parameters() {
  for (int w = 0; w < roles_.workers; ++w) TS_RETURN_IF_ERROR(answer(w));  // pending = false: not logged
  return wait_sends();
}

Status ParamServer::serve(const ParamServerOptions& options) {
  o_ = options;
  t_start_ = now_s();
  if (!o_.log_path.empty() && !log_) log_ = std::fopen(o_.log_path.c_str(), "a");
  for (auto& s : slots_) {
    s->step = o_.first_step;
    s->last_heard = t_start_;
  }
  if (o_.first_step >= o_.final_step) return Status::ok_status();  // a resumed run that was already complete
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
        apply(s.grads.data(), o_.lr(s.step));
        s.applied_version = opt_.steps_taken();
        s.pending = true;
      }
    }
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
        TS_RETURN_IF_ERROR(answer(w));
        progress = true;
      }
    }
    // Every live worker answered at the same step: the workers may now be saving it (a world collective).
    bool level = live_workers() > 0;
    const int64_t lo = slowest();
    for (const auto& s : slots_) level = level && (!s->live || (s->step == lo && !s->pending));
    if (level && lo > checkpointed) {
      if (o_.checkpoint_at(lo)) {
        TS_RETURN_IF_ERROR(wait_sends());
        TS_RETURN_IF_ERROR(o_.checkpoint(lo));
        for (auto& s : slots_) s->last_heard = now_s();
      }
      checkpointed = lo;
      if (lo >= o_.final_step) break;
    }
    if (live_workers() == 0) return comm_error("parameter server " + std::to_string(index_) + ": every worker was dropped");
    if (!sync && o_.dead_after_s > 0) {
      const double now = now_s();
      for (int w = 0; w < roles_.workers; ++w) {
        Slot& s = *slots_[static_cast<size_t>(w)];
        // A worker waiting for this server's answer, or saving a checkpoint its peers have not reached, is not silent.
        const bool waiting_for_us = s.pending || (s.step > checkpointed && o_.checkpoint_at(s.step));
        if (s.live && !waiting_for_us && s.step < o_.final_step && now - s.last_heard > o_.dead_after_s)
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
  return wait_sends();
}

}  // namespace tessera
