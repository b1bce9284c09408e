// AdamW over a flat range of the parameter buffer: the whole model, or the [begin, end) shard a
// ZeRO rank owns. Weight decay follows the layout's per-tensor rule (matrices only unless configured).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "core/memory.h"
#include "model/param_layout.h"

namespace tessera {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  bool decay_norms_and_biases = false;
  bool decay_embeddings = false;
};

class AdamW {
 public:
  // Owns moments for elements [begin, end) of the flat buffer (end < 0: to the end).
  // backend: whose memory the moments are and where the update runs (nullptr: host buffers and the
  // CPU kernels directly, for the parameter server and tests).
  AdamW(const ParamLayout& layout, AdamWConfig cfg, int64_t begin = 0, int64_t end = -1, Backend* backend = nullptr);

  // One update of params[begin,end) from grads[begin,end) x grad_scale; both point at the FULL flat
  // buffers. grad_scale: what the gradient still needs (a data-parallel sum's 1/dp, the clipping
  // factor), applied as the update reads it instead of in a pass of its own.
  void step(float* params, const float* grads, float lr, float grad_scale = 1.f);
  // The same update with the range's gradients held apart: range_grads[i] is the gradient of
  // element begin() + i (ZeRO keeps its reduced gradient shard outside the flat buffer).
  void step_with_range_grads(float* params, const float* range_grads, float lr, float grad_scale = 1.f);

  int64_t steps_taken() const { return t_; }
  void set_steps_taken(int64_t t) { t_ = t; }
  // Whose memory the moments are (nullptr: host buffers); checkpoints cross the line through it.
  Backend* backend() const { return backend_; }
  float* m() { return m_.as<float>(); }
  float* v() { return v_.as<float>(); }
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }
  int64_t numel() const { return end_ - begin_; }

 private:
  Backend* backend_;
  struct Segment {
    int64_t begin, end;  // absolute element range
    float weight_decay;
  };
  AdamWConfig cfg_;
  int64_t begin_, end_;
  std::vector<Segment> segments_;
  Buffer m_, v_;
  int64_t t_ = 0;
};

// Global L2 norm of grads[0, n); if max_norm > 0 and the norm exceeds it, scales grads by
// max_norm / norm (as torch.nn.utils.clip_grad_norm_). Returns the norm before clipping.
// The first form runs on `backend` (grads its memory); the second on the CPU kernels directly
// (host gradients: the parameter server worker and the tests).
float clip_grad_norm(Backend& backend, float* grads, int64_t n, float max_norm);
float clip_grad_norm(float* grads, int64_t n, float max_norm);

}  // namespace tessera
