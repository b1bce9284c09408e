// Gradient accumulation over the micro-batches of one step.
#include "parallel/micro_batch_runner.h"

namespace tessera {

AccumulationRunner::AccumulationRunner(Transformer& model, GradientSync& sync, BatchSource next_batch,
                                       int64_t micro_batches)
    : model_(model), sync_(sync), next_batch_(std::move(next_batch)), micro_batches_(micro_batches),
      inputs_(model.batch() * model.seq_len()), targets_(model.batch() * model.seq_len()),
      loss_sum_(model.backend().allocate(sizeof(double), MemCategory::activations)) {}

Status AccumulationRunner::run(Timeline& timeline) {
  Backend& be = model_.backend();
  auto* loss_sum = loss_sum_.as<double>();
  be.fill_f64(loss_sum, 1, 0.0);
  for (int64_t micro = 0; micro < micro_batches_; ++micro) {
    {
      TimelineSpan span(timeline, "data", "data", 2);
      next_batch_(inputs_.data(), targets_.data());
    }
    sync_.set_sync(micro == micro_batches_ - 1);  // no communication on accumulation micro-steps
    {
      TimelineSpan span(timeline, "forward", "compute");
      model_.forward(inputs_.data(), targets_.data(), loss_sum);
    }
    TimelineSpan span(timeline, "backward", "compute");
    model_.backward(loss_scale_ / static_cast<float>(micro_batches_));
  }
  return Status::ok_status();
}

Result<double> AccumulationRunner::step_loss() {
  double loss_sum = 0;
  model_.backend().copy_to_host(&loss_sum, loss_sum_.as<double>(), sizeof loss_sum);
  return loss_sum / static_cast<double>(micro_batches_);
}

}  // namespace tessera
