// The worker side of the parameter server: push gradient ranges, receive parameter ranges.
#include "parallel/param_server_worker.h"

#include <algorithm>
#include <chrono>

#include "comm/agreement.h"

namespace tessera {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

ParamServerWorker::ParamServerWorker(const PsRoles& roles, PsConsistency consistency,
                                     std::unique_ptr<Communicator> link, Communicator& workers,
                                     std::unique_ptr<Communicator> solo, ParamStore& store, const AdamWConfig& optim,
                                     float grad_clip, const CompressionConfig& compression)
    : roles_(roles), consistency_(consistency), link_owner_(std::move(link)), link_(*link_owner_), workers_(workers),
      solo_(std::move(solo)), store_(store),
      step_count_(store.layout(), optim, 0, 0), grad_clip_(grad_clip),
      push_(static_cast<size_t>(roles.servers)), reply_(static_cast<size_t>(roles.servers)) {
  for (int s = 0; s < roles.servers; ++s) ranges_.push_back(roles.shard(s, store.numel()));
  if (compression.kind == CompressionKind::none) return;
  compressor_ = make_compressor(compression);
  for (const FlatRange& r : ranges_) {
    residual_.emplace_back(static_cast<size_t>(r.numel()), 0.f);
    wire_.emplace_back(static_cast<size_t>(compressor_->payload_bytes(r.numel())));
  }
}

std::string ParamServerWorker::server_name(int s) const {
  return "parameter server " + std::to_string(s) + " (world rank " + std::to_string(roles_.server_world_rank(s)) + ")";
}

Status ParamServerWorker::wait_replies(const char* what) {
  Status first;
  // Two sends (pushes only) and two receives per server, in server order.
  for (size_t i = 0; i < recvs_.size(); ++i) {
    for (Work* w : {i < sends_.size() ? &sends_[i] : nullptr, &recvs_[i]}) {
      if (!w) continue;
      Status st = w->wait();
      if (!st.ok() && first.ok())
        first = Status(st.code(), server_name(static_cast<int>(i / 2)) + " did not answer " + what + ": " +
                                      st.message() +
                                      " (a dead or stuck server; restart the job from its last checkpoint with --resume)");
    }
  }
  sends_.clear();
  recvs_.clear();
  if (!first.ok()) return first;
  int64_t lowest = reply_.front().version;
  for (const ReplyHeader& h : reply_) lowest = std::min(lowest, h.version);
  version_ = lowest;
  step_count_.set_steps_taken(reply_.front().version);
  for (const FlatRange& r : ranges_) pulled_bytes_ += static_cast<uint64_t>(r.numel()) * sizeof(float);
  return Status::ok_status();
}

Status ParamServerWorker::broadcast_parameters() {
  for (int s = 0; s < roles_.servers; ++s) {
    const FlatRange& r = ranges_[static_cast<size_t>(s)];
    recvs_.push_back(link_.recv_async(&reply_[static_cast<size_t>(s)], sizeof(ReplyHeader), DType::u8, 1 + s,
                                      kReplyHeaderTag));
    recvs_.push_back(link_.recv_async(store_.params() + r.begin, r.numel(), DType::f32, 1 + s, kReplyDataTag));
  }
  TS_RETURN_IF_ERROR(wait_replies("the initial parameters"));
  pulled_bytes_ = 0;  // traffic counts the steps' pulls only
  return Status::ok_status();
}

Status ParamServerWorker::finish() {
  const bool local_clip = consistency_ != PsConsistency::sync;
  if (local_clip) local_norm_ = tessera::clip_grad_norm(store_.grads(), store_.numel(), grad_clip_);
  t_push_ = now_s();
  for (int s = 0; s < roles_.servers; ++s) {
    const FlatRange& r = ranges_[static_cast<size_t>(s)];
    PushHeader& h = push_[static_cast<size_t>(s)];
    const float* g = store_.grads() + r.begin;
    const void* payload = g;
    int64_t bytes = r.numel() * static_cast<int64_t>(sizeof(float));
    if (compressor_) {  // error feedback: the residual carries what this push drops into the next
      std::vector<uint8_t>& wire = wire_[static_cast<size_t>(s)];
      compressor_->compress(g, r.numel(), residual_[static_cast<size_t>(s)].data(), wire.data());
      payload = wire.data();
      bytes = static_cast<int64_t>(wire.size());
    }
    h = PushHeader{version_, local_clip ? 1 : 0, bytes, 0};
    // Post the answer's receives first: the server may answer as soon as the push lands.
    recvs_.push_back(link_.recv_async(&reply_[static_cast<size_t>(s)], sizeof(ReplyHeader), DType::u8, 1 + s,
                                      kReplyHeaderTag));
    recvs_.push_back(link_.recv_async(store_.params() + r.begin, r.numel(), DType::f32, 1 + s, kReplyDataTag));
    sends_.push_back(link_.send_async(&h, sizeof(PushHeader), DType::u8, 1 + s, kPushHeaderTag));
    sends_.push_back(compressor_ ? link_.send_async(payload, bytes, DType::u8, 1 + s, kPushDataTag)
                                 : link_.send_async(g, r.numel(), DType::f32, 1 + s, kPushDataTag));
    pushed_bytes_ += static_cast<uint64_t>(h.payload_bytes);
  }
  return Status::ok_status();
}

Result<float> ParamServerWorker::clip_grad_norm(float) {
  const double t0 = now_s();
  TS_RETURN_IF_ERROR(wait_replies("this worker's push"));
  const double t1 = now_s();
  exposed_wait_s_ += t1 - t0;
  if (trace_)
    for (int s = 0; s < roles_.servers; ++s) trace_(static_cast<size_t>(s), t_push_, t1);
  if (consistency_ != PsConsistency::sync) return local_norm_;
  return static_cast<float>(reply_.front().grad_norm);
}

Status ParamServerWorker::average_over_replicas(float* values, int64_t n) {
  if (consistency_ != PsConsistency::sync || workers_.size() == 1) return Status::ok_status();
  return workers_.all_reduce_async(values, values, n, DType::f32, ReduceOp::avg).wait();
}

Status ParamServerWorker::verify_replicas(std::string_view what) {
  if (consistency_ != PsConsistency::sync) return Status::ok_status();
  const uint64_t h = agreement_hash(std::string_view(reinterpret_cast<const char*>(store_.params()),
                                                     static_cast<size_t>(store_.numel()) * sizeof(float)));
  return check_agreement(workers_, what, h);
}

}  // namespace tessera
