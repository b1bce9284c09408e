// AdamW segments (per-tensor weight decay) and global-norm clipping.
#include "optim/adamw.h"

#include <algorithm>
#include <cmath>

#include "backend/ops.h"

namespace tessera {

namespace {
Buffer moments(Backend* backend, int64_t n) {
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  return backend ? backend->allocate(bytes, MemCategory::optimizer_state)
                 : Buffer(bytes, MemCategory::optimizer_state);
}
}  // namespace

AdamW::AdamW(const ParamLayout& layout, AdamWConfig cfg, int64_t begin, int64_t end, Backend* backend)
    : backend_(backend), cfg_(cfg), begin_(begin), end_(end < 0 ? layout.total_numel() : end),
      m_(moments(backend, end_ - begin_)), v_(moments(backend, end_ - begin_)) {
  for (const auto& p : layout.params()) {
    int64_t b = std::max(p.offset, begin_), e = std::min(p.offset + p.numel, end_);
    if (b >= e) continue;
    const bool embedding = p.name == "wte" || p.name == "wpe";
    bool decay = p.decay;
    if (embedding && cfg.decay_embeddings) decay = true;
    if (p.shape.size() == 1 && cfg.decay_norms_and_biases) decay = true;
    segments_.push_back({b, e, decay ? cfg.weight_decay : 0.f});
  }
}

void AdamW::step(float* params, const float* grads, float lr, float grad_scale) {
  step_with_range_grads(params, grads + begin_, lr, grad_scale);
}

void AdamW::step_with_range_grads(float* params, const float* range_grads, float lr, float grad_scale) {
  ++t_;
  for (const Segment& s : segments_) {
    const int64_t local = s.begin - begin_;
    float* p = params + s.begin;
    const float* g = range_grads + local;
    const int64_t n = s.end - s.begin;
    if (backend_) backend_->adamw_update(p, g, m() + local, v() + local, n, lr, cfg_.beta1, cfg_.beta2, cfg_.eps,
                                         s.weight_decay, t_, grad_scale);
    else ops::adamw_update(p, g, m() + local, v() + local, n, lr, cfg_.beta1, cfg_.beta2, cfg_.eps, s.weight_decay, t_,
                           grad_scale);
  }
}

float clip_grad_norm(Backend& backend, float* grads, int64_t n, float max_norm) {
  const double norm = std::sqrt(backend.sum_of_squares(grads, n));
  if (max_norm > 0 && norm > max_norm) backend.scale_inplace(grads, n, static_cast<float>(max_norm / (norm + 1e-6)));
  return static_cast<float>(norm);
}

float clip_grad_norm(float* grads, int64_t n, float max_norm) {
  const double norm = std::sqrt(ops::sum_of_squares(grads, n));
  if (max_norm > 0 && norm > max_norm) {
    ops::scale_inplace(grads, n, static_cast<float>(max_norm / (norm + 1e-6)));
  }
  return static_cast<float>(norm);
}

}  // namespace tessera
