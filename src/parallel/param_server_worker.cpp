// The worker side of the parameter server: push gradient ranges, receive parameter ranges.
#include "parallel/param_server_worker.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "backend/ops.h"
#include "comm/agreement.h"
#include "parallel/param_server_replica.h"

namespace tessera {

ParamServerWorker::ParamServerWorker(Backend& backend, const PsRoles& roles, PsConsistency consistency,
                                     std::unique_ptr<Communicator> link, const ModelParallelGroups& groups,
                                     std::unique_ptr<Communicator> solo, std::vector<ParamStore*> chunks,
                                     float grad_clip, const CompressionConfig& compression)
    : backend_(backend), roles_(roles), consistency_(consistency), link_owner_(std::move(link)), link_(*link_owner_), groups_(groups),
      model_parallel_(groups.tp->size() > 1 || groups.pp->size() > 1), solo_(std::move(solo)),
      chunks_(std::move(chunks)), grad_clip_(grad_clip),
      push_(static_cast<size_t>(roles.servers)), reply_(static_cast<size_t>(roles.servers)) {
  for (int s = 0; s < roles.servers; ++s) {
    ranges_.emplace_back();
    for (ParamStore* c : chunks_) ranges_.back().push_back(roles.shard(s, c->numel()));
  }
  if (compression.kind == CompressionKind::none) return;
  compressor_ = make_compressor(backend_, compression);
  for (const std::vector<FlatRange>& per_chunk : ranges_) {
    residual_.emplace_back();
    wire_.emplace_back();
    for (const FlatRange& r : per_chunk) {
      residual_.back().emplace_back(static_cast<size_t>(r.numel()), 0.f);
      wire_.back().emplace_back(static_cast<size_t>(compressor_->payload_bytes(r.numel())));
    }
  }
}

std::string ParamServerWorker::server_name(int s) const {
  return "parameter server " + std::to_string(s) + " (world rank " + std::to_string(roles_.server_world_rank(s)) + ")";
}

// The receives of server s's answer: its header, then its range of each chunk's parameters.
void ParamServerWorker::post_replies(int s) {
  pending_.emplace_back(s, link_.recv_async(&reply_[static_cast<size_t>(s)], sizeof(ReplyHeader), DType::u8, 1 + s,
                                            kReplyHeaderTag));
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const FlatRange& r = ranges_[static_cast<size_t>(s)][c];
    pending_.emplace_back(s, link_.recv_async(chunks_[c]->params() + r.begin, r.numel(), DType::f32, 1 + s,
                                              kReplyDataTag));
  }
}

Status ParamServerWorker::wait_replies(const char* what) {
  Status first;
  for (auto& [s, work] : pending_) {
    Status st = work.wait();
    if (!st.ok() && first.ok())
      first = Status(st.code(), server_name(s) + " did not answer " + what + ": " + st.message() +
                                    " (a dead or stuck server; restart the job from its last checkpoint with --resume)");
  }
  pending_.clear();
  if (!first.ok()) return first;
  int64_t lowest = reply_.front().version;
  for (const ReplyHeader& h : reply_) lowest = std::min(lowest, h.version);
  version_ = lowest;
  server_steps_ = reply_.front().version;
  for (const std::vector<FlatRange>& per_chunk : ranges_)
    for (const FlatRange& r : per_chunk) pulled_bytes_ += static_cast<uint64_t>(r.numel()) * sizeof(float);
  return Status::ok_status();
}

Status ParamServerWorker::broadcast_parameters() {
  if (standby_) return Status::ok_status();
  for (int s = 0; s < roles_.servers; ++s) post_replies(s);
  TS_RETURN_IF_ERROR(wait_replies("the initial parameters"));
  pulled_bytes_ = 0;  // traffic counts the steps' pulls only
  return Status::ok_status();
}

// Async modes: clips by this replica's own norm (a whole replica: its one buffer; spread over
// tp x pp: the norm over the replica's ranks, as ModelParallelSync counts it).
Status ParamServerWorker::clip_locally() {
  if (!model_parallel_) {
    ParamStore& store = *chunks_.front();
    local_norm_ = tessera::clip_grad_norm(backend_, store.grads(), store.numel(), grad_clip_);
    return Status::ok_status();
  }
  TS_ASSIGN_OR_RETURN(const double norm, replica_grad_norm(backend_, groups_, chunks_));
  if (grad_clip_ > 0 && norm > grad_clip_)
    for (ParamStore* c : chunks_) backend_.scale_inplace(c->grads(), c->numel(), static_cast<float>(grad_clip_ / (norm + 1e-6)));
  local_norm_ = static_cast<float>(norm);
  return Status::ok_status();
}

Status ParamServerWorker::finish() {
  if (model_parallel_) TS_RETURN_IF_ERROR(correct_replica_grads(backend_, groups_, chunks_));
  const bool local_clip = consistency_ != PsConsistency::sync;
  if (local_clip) TS_RETURN_IF_ERROR(clip_locally());
  t_push_ = Timeline::now_s();
  for (int s = 0; s < roles_.servers; ++s) {
    const std::vector<FlatRange>& per_chunk = ranges_[static_cast<size_t>(s)];
    std::vector<const void*> payload(chunks_.size());
    std::vector<int64_t> bytes(chunks_.size());
    int64_t total = 0;
    for (size_t c = 0; c < chunks_.size(); ++c) {
      const FlatRange& r = per_chunk[c];
      const float* g = chunks_[c]->grads() + r.begin;
      payload[c] = g;
      bytes[c] = r.numel() * static_cast<int64_t>(sizeof(float));
      if (compressor_) {  // error feedback: the residual carries what this push drops into the next
        std::vector<uint8_t>& wire = wire_[static_cast<size_t>(s)][c];
        compressor_->compress(g, r.numel(), residual_[static_cast<size_t>(s)][c].data(), wire.data());
        payload[c] = wire.data();
        bytes[c] = static_cast<int64_t>(wire.size());
      }
      total += bytes[c];
    }
    PushHeader& h = push_[static_cast<size_t>(s)];
    h = PushHeader{version_, local_clip ? 1 : 0, total, stop_source_ ? static_cast<int64_t>(*stop_source_) : 0};
    // Post the answer's receives first: the server may answer as soon as the push lands.
    post_replies(s);
    pending_.emplace_back(s, link_.send_async(&h, sizeof(PushHeader), DType::u8, 1 + s, kPushHeaderTag));
    for (size_t c = 0; c < chunks_.size(); ++c)
      pending_.emplace_back(s, compressor_ ? link_.send_async(payload[c], bytes[c], DType::u8, 1 + s, kPushDataTag)
                                           : link_.send_async(payload[c], per_chunk[c].numel(), DType::f32, 1 + s,
                                                              kPushDataTag));
    pushed_bytes_ += static_cast<uint64_t>(h.payload_bytes);
  }
  return Status::ok_status();
}

Result<UpdateResult> ParamServerWorker::update(float, float, Timeline& timeline) {
  UpdateResult r;
  TS_RETURN_IF_ERROR(timed_wait(timeline, "parameter sync wait", &r.parameter_wait_s,
                                [&] { return wait_replies("this worker's push"); }));
  exposed_wait_s_ += r.parameter_wait_s;
  if (trace_) {
    const double answered = Timeline::now_s();
    for (int s = 0; s < roles_.servers; ++s) trace_(static_cast<size_t>(s), t_push_, answered);
  }
  r.grad_norm = consistency_ != PsConsistency::sync ? local_norm_ : static_cast<float>(reply_.front().grad_norm);
  return r;
}

ReleasedWorker ParamServerWorker::abandon_exchange() {
  ReleasedWorker r;
  for (auto& [s, work] : pending_) {
    const Abandoned a = work.abandon();
    r.receives_withdrawn += a == Abandoned::withdrawn;
    r.handed_over += a == Abandoned::handed_over;
  }
  pending_.clear();
  for (const CollectiveRecord& op : link_.recent_ops()) r.ops_left_running += op.state == OpState::running;
  link_.abandon();
  if (solo_) solo_->abandon();
  if (r.handed_over == 0) return r;
  // MPI may still use these buffers: moved (a vector's move keeps its storage) into an object
  // that is never freed. The chunk stores are the caller's to keep.
  struct Kept {
    std::vector<ReplyHeader> reply;
    std::vector<PushHeader> push;
    std::vector<std::vector<std::vector<uint8_t>>> wire;
  };
  auto* kept = new Kept{std::move(reply_), std::move(push_), std::move(wire_)};
  r.bytes_kept += static_cast<int64_t>(sizeof(Kept) + kept->reply.size() * sizeof(ReplyHeader) +
                                       kept->push.size() * sizeof(PushHeader));
  for (const auto& per_chunk : kept->wire)
    for (const auto& w : per_chunk) r.bytes_kept += static_cast<int64_t>(w.size());
  for (const ParamStore* c : chunks_) r.bytes_kept += 2 * c->numel() * static_cast<int64_t>(sizeof(float));
  return r;
}

std::vector<CompressionState> ParamServerWorker::compression_state() {
  std::vector<CompressionState> out;
  for (size_t s = 0; s < residual_.size(); ++s)
    for (size_t c = 0; c < residual_[s].size(); ++c)
      out.push_back({"ps_residual/server" + std::to_string(s) + ".chunk" + std::to_string(c), residual_[s][c].data(),
                     static_cast<int64_t>(residual_[s][c].size())});
  return out;
}

int ParamServerWorker::agreed_stop_signal() const {
  int64_t sig = 0;
  for (const ReplyHeader& h : reply_)  // the servers agreed: all equal
    if (h.stop_after != 0 && h.stop_after == h.step) sig = std::max(sig, h.stop_signal);
  return static_cast<int>(sig);
}

std::vector<int> ParamServerWorker::lost_workers() const {
  return lost_ranks(reply_.front().lost);  // the servers agreed: all equal
}

Result<SpareNotice> ParamServerWorker::next_notice(const std::function<void()>& idle) {
  Work notice = link_.recv_async(&notice_, sizeof(SpareNotice), DType::u8, 1, kSpareNoticeTag);
  while (!notice.test()) {
    if (idle) idle();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // notices are rare; a spare may share a core
  }
  const Status st = notice.wait();
  if (!st.ok()) return Status(st.code(), "spare worker: the notice from " + server_name(0) + " failed: " + st.message());
  return notice_;
}

Status ParamServerWorker::average_over_replicas(float* values, int64_t n) {
  Communicator& workers = *groups_.dp;
  if (consistency_ != PsConsistency::sync || workers.size() == 1) return Status::ok_status();
  return workers.all_reduce_async(values, values, n, DType::f32, ReduceOp::avg).wait();
}

Status ParamServerWorker::verify_replicas(std::string_view what) {
  if (consistency_ != PsConsistency::sync) return Status::ok_status();
  uint64_t h = 0;
  for (ParamStore* c : chunks_)
    h = agreement_hash(c->params(), static_cast<size_t>(c->numel()) * sizeof(float), h);
  return check_agreement(*groups_.dp, what, h);
}

}  // namespace tessera
