// Executing a pipeline schedule's actions on this stage.
#include "parallel/pipeline_runner.h"

#include <algorithm>
#include <string>

#include "core/log.h"
#include "parallel/pipeline_schedule_sim.h"

namespace tessera {

namespace {
// The first failure of the model's tensor-, context- or expert-parallel exchanges in its last pass.
Status model_comm_status(const Transformer& model) {
  TS_RETURN_IF_ERROR(model.tp_status());
  TS_RETURN_IF_ERROR(model.cp_status());
  return model.ep_status();
}
}  // namespace
namespace {

constexpr int kActivationTag = 1;
constexpr int kGradientTag = 2;

std::string where(const char* what, int micro, int chunk) {
  return std::string(what) + " of micro-batch " + std::to_string(micro) + " (chunk " + std::to_string(chunk) + ")";
}

}  // namespace

// Sends in flight from one buffer, waited before that buffer is written again.
class PendingSends {
 public:
  void add(Work w) { sends_.push_back(std::move(w)); }
  Status wait() {
    Status first;
    for (Work& w : sends_) {
      const Status s = w.wait();
      if (!s.ok() && first.ok()) first = s;
    }
    sends_.clear();
    return first;
  }
  bool empty() const { return sends_.empty(); }

 private:
  std::vector<Work> sends_;
};

// A slot's two sent buffers are written by different passes, so a pass waits only for its own: a
// slot released after sending its input gradient takes the next micro-batch's activation and runs
// its forward while that gradient still waits for the previous stage to receive it (which under
// interleaving can be a whole backward and forward later).
struct PipelineRunner::Slot {
  std::unique_ptr<Transformer> model;
  bool busy = false;
  PendingSends activation_sends;  // from stage_output(): the next forward writes it
  PendingSends gradient_sends;    // from stage_input_grad(): the next backward writes it
  Status wait_sends() {
    const Status a = activation_sends.wait();
    const Status g = gradient_sends.wait();
    return a.ok() ? g : a;
  }
};

namespace {
// Adds the seconds of its scope to `total`: a wait on the neighbouring stages.
class NeighbourWait {
 public:
  explicit NeighbourWait(double& total) : total_(total), t0_(Timeline::now_s()) {}
  ~NeighbourWait() { total_ += Timeline::now_s() - t0_; }
  NeighbourWait(const NeighbourWait&) = delete;
  NeighbourWait& operator=(const NeighbourWait&) = delete;

 private:
  double& total_;
  double t0_;
};

// Waits for a buffer's sends before a pass writes it; the wait shows in the timeline when there is one.
Status wait_before_writing(PendingSends& sends, Timeline& timeline, double& waited) {
  if (sends.empty()) return Status::ok_status();
  TimelineSpan span(timeline, "send wait", "comm", 1);
  NeighbourWait clock(waited);
  return sends.wait();
}
}  // namespace

PipelineRunner::PipelineRunner(Backend& backend, const ModelConfig& cfg, std::vector<ParamStore*> chunks, int64_t B, int64_t T,
                               Recompute recompute, Communicator& pp, PipelineScheduleKind kind, PipelineShape shape, GradientReduction& reduction,
                               ConfigureModel configure, BatchSource next_batch)
    : backend_(backend), cfg_(cfg), B_(B), T_(T), C_(cfg.d_model), pp_(pp), stage_(pp.rank()), shape_(shape),
      reduction_(reduction), next_batch_(std::move(next_batch)), loss_sum_(backend.allocate(sizeof(double), MemCategory::activations)) {
  TS_CHECK(shape_.stages == pp.size()) << "pipeline shape has " << shape_.stages << " stages, pp group " << pp.size();
  TS_CHECK(static_cast<int>(chunks.size()) == shape_.virtual_stages)
      << chunks.size() << " model chunks for " << shape_.virtual_stages << " virtual stages";
  actions_ = make_pipeline_schedule(kind, shape_, stage_);
  split_ = splits_backward(actions_);
  models_.resize(chunks.size());
  for (size_t c = 0; c < chunks.size(); ++c) {
    const int n = activation_slots(actions_, static_cast<int>(c));
    for (int i = 0; i < n; ++i) {
      auto slot = std::make_unique<Slot>();
      slot->model = std::make_unique<Transformer>(backend, cfg, *chunks[c], B, T, recompute);
      slot->model->set_split_backward(split_);
      configure(static_cast<int>(c), *slot->model);
      models_[c].push_back(std::move(slot));
    }
  }
  const size_t n = static_cast<size_t>(B * T * shape_.micro_batches);
  inputs_.resize(n);
  targets_.resize(n);
}

PipelineRunner::~PipelineRunner() = default;

PipelineRunner::Slot& PipelineRunner::slot_for(int micro, int chunk) {
  auto it = in_flight_.find({micro, chunk});
  if (it != in_flight_.end()) return *it->second;
  for (auto& s : models_[chunk])
    if (!s->busy) {
      s->busy = true;
      in_flight_[{micro, chunk}] = s.get();
      return *s;
    }
  TS_CHECK(false) << "no free activation slot for " << where("chunk", micro, chunk) << ": schedule bug";
  __builtin_unreachable();
}

void PipelineRunner::release(int micro, int chunk) {
  auto it = in_flight_.find({micro, chunk});
  if (it == in_flight_.end()) return;
  it->second->busy = false;
  in_flight_.erase(it);
}

Status PipelineRunner::run_action(const PipeAction& a, Timeline& timeline) {
  const int64_t BT = B_ * T_, act = BT * C_;
  const float micro_scale = loss_scale_ / static_cast<float>(shape_.micro_batches);
  Slot& slot = slot_for(a.micro_batch, a.chunk);
  Transformer& model = *slot.model;
  switch (a.op) {
    case PipeOp::recv_activation: {
      // The input is sent nowhere, unless a chunk without layers passes its input on as its output.
      if (model.stage_input() == model.stage_output()) TS_RETURN_IF_ERROR(wait_before_writing(slot.activation_sends, timeline, neighbour_wait_s_));
      TimelineSpan span(timeline, "recv activation", "comm", 1);
      NeighbourWait clock(neighbour_wait_s_);
      const Status s = pp_.recv_async(model.stage_input(), act, DType::f32, a.peer_stage, kActivationTag).wait();
      if (!s.ok()) return Status(s.code(), where("receiving the activation", a.micro_batch, a.chunk) + ": " + s.message());
      return Status::ok_status();
    }
    case PipeOp::forward: {
      TS_RETURN_IF_ERROR(wait_before_writing(slot.activation_sends, timeline, neighbour_wait_s_));
      TimelineSpan span(timeline, "forward", "compute");
      const size_t off = static_cast<size_t>(a.micro_batch * BT);
      const int32_t* tokens = first_virtual(a.chunk) ? inputs_.data() + off : nullptr;
      const int32_t* targets = last_virtual(a.chunk) ? targets_.data() + off : nullptr;
      if (probe_) probe_->begin_micro_batch(a.micro_batch);
      model.forward(tokens, targets, loss_sum_.as<double>());  // adds only where there are targets
      return model_comm_status(model);
    }
    case PipeOp::send_activation: {
      TimelineSpan span(timeline, "send activation", "comm", 1);
      slot.activation_sends.add(pp_.send_async(model.stage_output(), act, DType::f32, a.peer_stage, kActivationTag));
      return Status::ok_status();
    }
    case PipeOp::recv_gradient: {
      TimelineSpan span(timeline, "recv gradient", "comm", 1);
      NeighbourWait clock(neighbour_wait_s_);
      const Status s = pp_.recv_async(model.stage_output_grad(), act, DType::f32, a.peer_stage, kGradientTag).wait();
      if (!s.ok()) return Status(s.code(), where("receiving the gradient", a.micro_batch, a.chunk) + ": " + s.message());
      return Status::ok_status();
    }
    case PipeOp::backward: {
      TS_RETURN_IF_ERROR(wait_before_writing(slot.gradient_sends, timeline, neighbour_wait_s_));
      TimelineSpan span(timeline, "backward", "compute");
      // The chunk's last backward communicates the gradients (under a split backward: its weight pass).
      if (!replaying_ && !split_) reduction_.begin_micro_batch(a.micro_batch == shape_.micro_batches - 1);
      if (probe_) probe_->begin_micro_batch(a.micro_batch);
      model.backward(micro_scale);  // the scale applies where the loss is; other stages get scaled gradients
      if (first_virtual(a.chunk) && !split_) release(a.micro_batch, a.chunk);  // nothing to send back
      return model_comm_status(model);
    }
    case PipeOp::send_gradient: {
      TimelineSpan span(timeline, "send gradient", "comm", 1);
      slot.gradient_sends.add(pp_.send_async(model.stage_input_grad(), act, DType::f32, a.peer_stage, kGradientTag));
      if (!split_) release(a.micro_batch, a.chunk);
      return Status::ok_status();
    }
    case PipeOp::weight: {  // the slot's activations are read for the last time
      TimelineSpan span(timeline, "backward weights", "compute");
      if (!replaying_) reduction_.begin_micro_batch(a.micro_batch == shape_.micro_batches - 1);
      model.backward_weights();
      release(a.micro_batch, a.chunk);
      return model_comm_status(model);
    }
  }
  return Status::ok_status();
}

Status PipelineRunner::wait_sends() {
  Status first;
  for (auto& chunk : models_)
    for (auto& s : chunk) {
      const Status st = s->wait_sends();
      if (!st.ok() && first.ok()) first = st;
    }
  if (!first.ok()) return Status(first.code(), "pipeline send: " + first.message());
  return first;
}

Status PipelineRunner::broadcast_from_last_stage(double& value) {
  if (shape_.stages == 1) return Status::ok_status();
  const Status s = pp_.broadcast_async(&value, sizeof(double), DType::u8, shape_.stages - 1).wait();
  if (!s.ok()) return Status(s.code(), "loss from the last pipeline stage: " + s.message());
  return s;
}

Status PipelineRunner::run(Timeline& timeline) {
  const int64_t BT = B_ * T_;
  {
    TimelineSpan span(timeline, "data", "data", 2);
    for (int m = 0; m < shape_.micro_batches; ++m) next_batch_(inputs_.data() + m * BT, targets_.data() + m * BT);
  }
  return run_actions(timeline);
}

Status PipelineRunner::replay(Timeline& timeline) {
  replaying_ = true;
  for (auto& chunk : models_)
    for (auto& s : chunk) s->model->mute_grad_ready(true);
  const Status st = run_actions(timeline);
  for (auto& chunk : models_)
    for (auto& s : chunk) s->model->mute_grad_ready(false);
  replaying_ = false;
  return st;
}

void PipelineRunner::skip_batches() {
  const int64_t BT = B_ * T_;
  for (int m = 0; m < shape_.micro_batches; ++m) next_batch_(inputs_.data() + m * BT, targets_.data() + m * BT);
}

void PipelineRunner::set_numerics_probe(NumericsProbe* probe) {
  probe_ = probe;
  for (auto& chunk : models_)
    for (auto& s : chunk) s->model->set_numerics_probe(probe);
}

Status PipelineRunner::run_actions(Timeline& timeline) {
  backend_.fill_f64(loss_sum_.as<double>(), 1, 0.0);
  take_moe_load();  // count this step's micro-batches only (not the evaluation's forwards)
  for (const PipeAction& a : actions_) {
    const Status s = run_action(a, timeline);
    if (!s.ok()) return Status(s.code(), "pipeline stage " + std::to_string(stage_) + ": " + s.message());
  }
  {
    NeighbourWait clock(neighbour_wait_s_);
    TS_RETURN_IF_ERROR(wait_sends());
  }
  TS_CHECK(in_flight_.empty()) << "pipeline schedule left micro-batches in flight";
  return Status::ok_status();
}

std::vector<Transformer::MoeLayerLoad> PipelineRunner::take_moe_load() {
  std::vector<Transformer::MoeLayerLoad> merged;  // by layer: a chunk's slots hold the same layers
  for (auto& chunk : models_)
    for (auto& slot : chunk)
      for (Transformer::MoeLayerLoad& l : slot->model->take_moe_load()) {
        auto it = std::find_if(merged.begin(), merged.end(), [&](const auto& m) { return m.layer == l.layer; });
        if (it == merged.end()) {
          merged.push_back(std::move(l));
          continue;
        }
        for (size_t e = 0; e < l.tokens.size(); ++e) {
          it->tokens[e] += l.tokens[e];
          it->routed[e] += l.routed[e];
        }
        it->dropped += l.dropped;
        it->entropy_sum += l.entropy_sum;
        it->forwards += l.forwards;
      }
  std::sort(merged.begin(), merged.end(), [](const auto& a, const auto& b) { return a.layer < b.layer; });
  return merged;
}

Result<double> PipelineRunner::step_loss() {
  auto* device_sum = loss_sum_.as<double>();
  if (shape_.stages > 1) {
    const Status s = pp_.broadcast_async(device_sum, sizeof(double), DType::u8, shape_.stages - 1).wait();
    if (!s.ok()) return Status(s.code(), "loss from the last pipeline stage: " + s.message());
  }
  double loss_sum = 0;
  backend_.copy_to_host(&loss_sum, device_sum, sizeof loss_sum);
  return loss_sum / static_cast<double>(shape_.micro_batches);
}

Result<EvalResult> PipelineRunner::evaluate(EvalLoader& loader, int64_t max_batches) {
  const int64_t BT = B_ * T_, act = BT * C_;
  const int p = shape_.stages, V = shape_.virtual_stages;
  std::vector<int32_t> inputs(BT), targets(BT);
  EvalResult r;
  double sum = 0;
  // Every stage reads the same batches, so all agree on when the split ends.
  while ((max_batches <= 0 || r.batches < max_batches) && loader.next_batch(inputs.data(), targets.data())) {
    if (stage_ == 0) TS_RETURN_IF_ERROR(check_tokens_in_vocabulary(inputs.data(), BT, cfg_.vocab_size));
    for (int c = 0; c < V; ++c) {  // virtual stages in order: c * p + stage
      Transformer& model = *models_[c][0]->model;
      const int vs = c * p + stage_;
      if (vs > 0) {
        const Status s = pp_.recv_async(model.stage_input(), act, DType::f32, (vs - 1) % p, kActivationTag).wait();
        if (!s.ok()) return Status(s.code(), "evaluation: receiving an activation: " + s.message());
      }
      const float loss = model.forward(first_virtual(c) ? inputs.data() : nullptr,
                                       last_virtual(c) ? targets.data() : nullptr);
      TS_RETURN_IF_ERROR(model_comm_status(model));
      if (last_virtual(c)) sum += loss;
      if (vs + 1 < p * V)
        models_[c][0]->activation_sends.add(pp_.send_async(model.stage_output(), act, DType::f32, (vs + 1) % p, kActivationTag));
    }
    TS_RETURN_IF_ERROR(wait_sends());
    ++r.batches;
  }
  TS_RETURN_IF_ERROR(broadcast_from_last_stage(sum));
  if (r.batches > 0) r.mean_loss = sum / static_cast<double>(r.batches);
  return r;
}

}  // namespace tessera
