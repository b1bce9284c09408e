// The decoder-only transformer with explicit forward and backward over the layer range its
// ParamStore owns ([first_layer, last_layer) of the layout). The full model (range [0, L)) maps
// tokens to a loss; a pipeline stage maps hidden states (B,T,C) to hidden states.
// Activations are allocated once for a fixed micro-batch (B, T); forward/backward allocate nothing.
// Tensor parallelism reaches it only through TensorParallelHooks (identity by default).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "core/memory.h"
#include "model/config.h"
#include "model/op_profile.h"
#include "model/param_layout.h"
#include "model/tensor_parallel_hooks.h"

namespace tessera {

class Transformer {
 public:
  // B, T: micro-batch shape (T <= cfg.max_seq_len). `store` must outlive the model.
  Transformer(const ModelConfig& cfg, ParamStore& store, int64_t B, int64_t T);
  ~Transformer();
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  const ModelConfig& config() const { return cfg_; }
  int64_t batch() const { return B_; }
  int64_t seq_len() const { return T_; }
  bool is_first_stage() const { return first_ == 0; }
  bool is_last_stage() const { return last_ == cfg_.n_layer; }

  // Full model or first stage: tokens (B,T) in [0, V). Last stage with targets (B,T) (entries < 0
  // are ignored): returns the mean loss over valid targets. Without targets: computes logits()
  // and returns 0. Non-first stages take hidden states through stage_input() instead of tokens.
  float forward(const int32_t* tokens, const int32_t* targets);
  // Accumulates parameter gradients into the store (+=). The loss gradient is scaled by
  // loss_scale (e.g. 1/accumulation_steps). Requires a preceding forward with targets (last
  // stage) or a filled stage_output_grad() (non-last stage).
  void backward(float loss_scale = 1.f);

  // (B,T,V) logits of the last forward without targets.
  const float* logits() const;
  // Per-position losses (B,T) of the last forward with targets.
  const float* losses() const;
  // Pipeline seams: hidden states entering this stage (B,T,C) (write before forward on a
  // non-first stage), leaving it (read after forward on a non-last stage), the gradient w.r.t.
  // the output (write before backward on a non-last stage), and w.r.t. the input (read after).
  float* stage_input();
  const float* stage_output() const;
  float* stage_output_grad();
  const float* stage_input_grad() const;

  // Called during backward as soon as the gradients of `layer` are final (layer n_layer = final
  // norm/head, -1 = embeddings), in the order they become ready; data parallelism hooks in here.
  void set_grad_ready_callback(std::function<void(int layer)> cb) { grad_ready_ = std::move(cb); }

  // Conjugate tensor-parallel pairs called around the projections, embedding and loss (see
  // tensor_parallel_hooks.h); nullptr restores the identity. `hooks` must outlive the model.
  // Only tp_size() == 1 runs until the sharded math lands (TS_CHECKed).
  void set_tensor_parallel_hooks(TensorParallelHooks* hooks);

  // Per-kernel-group timing (benchmarks): enable, run steps, read seconds.
  OpProfile& profile() { return profile_; }

 private:
  struct Acts;
  struct Weights;  // resolved pointers into the store: no name look-ups in the step
  // Sizes of one micro-batch: N = B*T rows, Q = qkv width, FC = fc output width (F, or 2F for SwiGLU).
  struct Dims {
    int64_t B, T, N, C, Q, F, FC, NH, NKV, HS;
    bool llama;
  };
  Dims dims() const;
  ModelConfig cfg_;
  ParamStore& store_;
  int64_t B_, T_;
  int first_, last_;
  std::unique_ptr<Acts> acts_;
  std::unique_ptr<Weights> w_;
  OpProfile profile_;
  std::function<void(int)> grad_ready_;
  IdentityTensorParallelHooks identity_tp_;
  TensorParallelHooks* tp_ = &identity_tp_;
  const int32_t* last_tokens_ = nullptr;
};

}  // namespace tessera
