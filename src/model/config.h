// Model configuration: GPT-2 family (LayerNorm, GELU, learned positions, biases, tied head) and
// LLaMA family (RMSNorm, SwiGLU, RoPE, no biases, untied head, grouped-query attention, optional
// mixture-of-experts feed-forward layers), plus presets.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera {

enum class Arch { gpt2, llama };
std::string_view arch_name(Arch a);
Result<Arch> parse_arch(std::string_view s);

struct ModelConfig {
  std::string name = "custom";
  Arch arch = Arch::gpt2;
  int64_t vocab_size = 256;   // V
  int64_t max_seq_len = 256;  // maximum T (GPT-2: rows of the position table)
  int64_t n_layer = 2;        // L
  int64_t n_head = 4;         // NH
  int64_t n_kv_head = 4;      // NKV; NH % NKV == 0 (grouped-query when NKV < NH)
  int64_t d_model = 64;       // C
  int64_t d_ff = 256;         // MLP hidden width (GPT-2: 4C; LLaMA: SwiGLU hidden)
  float norm_eps = 1e-5f;
  float rope_theta = 10000.f;
  bool tied_embeddings = true;  // lm_head shares wte
  // Mixture of experts (llama only; docs/moe.md). moe_experts = 0: every layer is dense.
  int64_t moe_experts = 0;           // E: SwiGLU experts of width d_ff per MoE layer
  int64_t moe_top_k = 2;             // K experts per token (softmax router, renormalised top-k as Mixtral)
  float moe_capacity_factor = 0.f;   // 0: dropless; else each expert keeps ceil(cf * N * K / E) of N tokens
  float moe_aux_loss = 0.01f;        // load-balancing loss coefficient (per MoE layer, summed)
  float moe_z_loss = 0.f;            // router z-loss coefficient (ST-MoE)
  bool moe_shared_expert = false;    // also a dense SwiGLU of width d_ff that every token passes
  int64_t moe_every = 1;             // layer l is MoE when l % moe_every == 0

  bool is_moe() const { return moe_experts > 0; }
  bool is_moe_layer(int64_t l) const { return moe_experts > 0 && l % moe_every == 0; }
  // Whether layer l has the dense MLP tensors (mlp.fc.w, mlp.proj.w): dense layers, and MoE layers'
  // shared expert.
  bool has_dense_mlp(int64_t l) const { return !is_moe_layer(l) || moe_shared_expert; }
  // Slots per expert for a micro-batch of N tokens: ceil(cf * N * K / E), at least 1; 0 = dropless.
  int64_t moe_capacity(int64_t N) const;

  int64_t head_size() const { return d_model / n_head; }  // HS
  int64_t qkv_width() const { return (n_head + 2 * n_kv_head) * head_size(); }
  bool has_bias() const { return arch == Arch::gpt2; }
  bool learned_positions() const { return arch == Arch::gpt2; }
  // Number of parameters (tied head counted once).
  int64_t num_parameters() const;
  // Training FLOPs per token for forward+backward (6*N_matmul + attention), as in the PaLM appendix.
  double flops_per_token(int64_t T) const;
  // Checks divisibility and ranges; the message names the field and what is allowed.
  Status validate() const;
  Status validate_moe() const;  // the moe_* fields (part of validate())
};

// "tiny", "tiny-llama", "tiny-moe", "gpt2", "gpt2-medium", "llama-small", "bench-small", "bench-tiny".
Result<ModelConfig> model_preset(std::string_view name);
std::vector<std::string> preset_names();

}  // namespace tessera
