// Presets and validation of model configurations.
#include "model/config.h"

#include <algorithm>
#include <cmath>

namespace tessera {

std::string_view arch_name(Arch a) { return a == Arch::gpt2 ? "gpt2" : "llama"; }

Result<Arch> parse_arch(std::string_view s) {
  if (s == "gpt2") return Arch::gpt2;
  if (s == "llama") return Arch::llama;
  return invalid_argument("unknown architecture '" + std::string(s) + "': use \"gpt2\" or \"llama\"");
}

int64_t ModelConfig::moe_capacity(int64_t N) const {
  if (moe_experts <= 0 || !(moe_capacity_factor > 0)) return 0;
  const double slots = std::ceil(static_cast<double>(moe_capacity_factor) * static_cast<double>(N * moe_top_k) /
                                 static_cast<double>(moe_experts));
  return std::max<int64_t>(1, static_cast<int64_t>(slots));
}

int64_t ModelConfig::num_parameters() const {
  const int64_t C = d_model, V = vocab_size, F = d_ff, Q = qkv_width();
  const int64_t mlp_in = arch == Arch::llama ? 2 * F : F;
  int64_t total = V * C + C + (has_bias() ? C : 0);
  for (int64_t l = 0; l < n_layer; ++l) {
    int64_t per_layer = Q * C + C * n_head * head_size();
    if (has_dense_mlp(l)) per_layer += mlp_in * C + C * F;
    if (is_moe_layer(l)) per_layer += moe_experts * C + moe_experts * (2 * F * C + C * F);  // router + experts
    if (has_bias()) per_layer += Q + C + mlp_in + C + 2 * C;  // linear biases + 2 LayerNorm biases
    per_layer += 2 * C;                                         // two norm weights
    total += per_layer;
  }
  if (learned_positions()) total += max_seq_len * C;
  if (!tied_embeddings) total += V * C;
  return total;
}

double ModelConfig::flops_per_token(int64_t T) const {
  const double C = d_model, F = d_ff, V = vocab_size, Q = qkv_width();
  const double mlp_in = arch == Arch::llama ? 2 * F : F;
  // Active matmul parameters: a MoE layer runs its router and K experts (plus the shared expert).
  double matmul_params = V * C;
  for (int64_t l = 0; l < n_layer; ++l) {
    matmul_params += Q * C + C * C;
    if (has_dense_mlp(l)) matmul_params += mlp_in * C + C * F;
    if (is_moe_layer(l)) matmul_params += static_cast<double>(moe_experts) * C + moe_top_k * (mlp_in * C + C * F);
  }
  // attention: QK^T and AV, causal => half of the T x T work, x3 for forward+backward (x2 flops per mac)
  const double attn = n_layer * 2.0 * 2.0 * T * C * 0.5 * 3.0;
  return 6.0 * matmul_params + attn;
}

Status ModelConfig::validate() const {
  auto bad = [](const std::string& m) { return invalid_argument("model config: " + m); };
  if (vocab_size < 2) return bad("vocab_size must be >= 2 (got " + std::to_string(vocab_size) + ")");
  if (max_seq_len < 1) return bad("max_seq_len must be >= 1");
  if (n_layer < 1) return bad("n_layer must be >= 1");
  if (n_head < 1 || d_model < 1) return bad("n_head and d_model must be >= 1");
  if (d_model % n_head != 0)
    return bad("n_head (" + std::to_string(n_head) + ") must divide d_model (" + std::to_string(d_model) + ")");
  if (n_kv_head < 1 || n_head % n_kv_head != 0)
    return bad("n_kv_head (" + std::to_string(n_kv_head) + ") must divide n_head (" + std::to_string(n_head) + ")");
  if (head_size() % 2 != 0 && arch == Arch::llama) return bad("head size d_model/n_head must be even for RoPE");
  if (arch == Arch::gpt2 && n_kv_head != n_head) return bad("gpt2 architecture needs n_kv_head == n_head");
  if (d_ff < 1) return bad("d_ff must be >= 1");
  if (!(norm_eps > 0)) return bad("norm_eps must be > 0");
  return validate_moe();
}

Status ModelConfig::validate_moe() const {
  auto bad = [](const std::string& m) { return invalid_argument("model config: " + m); };
  auto num = [](auto v) { return std::to_string(v); };
  if (moe_experts < 0) return bad("moe_experts must be >= 0 (0 = dense; got " + num(moe_experts) + ")");
  if (moe_experts == 0) return Status::ok_status();
  if (arch != Arch::llama)
    return bad("moe_experts > 0 needs arch = \"llama\" (the experts are SwiGLU MLPs); use a llama preset such as "
               "\"tiny-moe\" or set model.moe_experts = 0");
  if (moe_top_k < 1 || moe_top_k > moe_experts)
    return bad("moe_top_k (" + num(moe_top_k) + ") must be in [1, moe_experts = " + num(moe_experts) +
               "]; lower moe_top_k or add experts");
  if (!(moe_capacity_factor >= 0) || !std::isfinite(moe_capacity_factor))
    return bad("moe_capacity_factor must be >= 0 (0 = dropless; got " + num(moe_capacity_factor) + ")");
  if (!(moe_aux_loss >= 0) || !std::isfinite(moe_aux_loss))
    return bad("moe_aux_loss must be >= 0 (got " + num(moe_aux_loss) + ")");
  if (!(moe_z_loss >= 0) || !std::isfinite(moe_z_loss))
    return bad("moe_z_loss must be >= 0 (got " + num(moe_z_loss) + ")");
  if (moe_every < 1) return bad("moe_every must be >= 1 (1 = every layer is MoE; got " + num(moe_every) + ")");
  return Status::ok_status();
}

namespace {
ModelConfig gpt2_like(std::string name, int64_t V, int64_t T, int64_t L, int64_t NH, int64_t C) {
  ModelConfig c;
  c.name = std::move(name);
  c.arch = Arch::gpt2;
  c.vocab_size = V; c.max_seq_len = T; c.n_layer = L; c.n_head = NH; c.n_kv_head = NH; c.d_model = C;
  c.d_ff = 4 * C;
  c.tied_embeddings = true;
  return c;
}
ModelConfig llama_like(std::string name, int64_t V, int64_t T, int64_t L, int64_t NH, int64_t NKV, int64_t C,
                       int64_t F) {
  ModelConfig c;
  c.name = std::move(name);
  c.arch = Arch::llama;
  c.vocab_size = V; c.max_seq_len = T; c.n_layer = L; c.n_head = NH; c.n_kv_head = NKV; c.d_model = C;
  c.d_ff = F;
  c.tied_embeddings = false;
  c.norm_eps = 1e-5f;
  return c;
}
}  // namespace

Result<ModelConfig> model_preset(std::string_view name) {
  if (name == "tiny") return gpt2_like("tiny", 256, 64, 2, 4, 64);
  if (name == "tiny-llama") return llama_like("tiny-llama", 256, 64, 2, 4, 2, 64, 160);
  if (name == "tiny-moe") {  // tiny-llama's attention, 4 SwiGLU experts of width 96, top-2, dropless
    ModelConfig c = llama_like("tiny-moe", 256, 64, 2, 4, 2, 64, 96);
    c.moe_experts = 4;
    c.moe_top_k = 2;
    return c;
  }
  if (name == "gpt2") return gpt2_like("gpt2", 50257, 1024, 12, 12, 768);
  if (name == "gpt2-medium") return gpt2_like("gpt2-medium", 50257, 1024, 24, 16, 1024);
  if (name == "llama-small") return llama_like("llama-small", 32000, 1024, 12, 12, 4, 768, 2048);
  if (name == "bench-small") return gpt2_like("bench-small", 8192, 512, 6, 6, 384);
  if (name == "bench-tiny") return gpt2_like("bench-tiny", 256, 256, 4, 4, 256);
  if (name == "kjv-byte") return gpt2_like("kjv-byte", 256, 256, 4, 4, 256);
  if (name == "kjv-bpe") return gpt2_like("kjv-bpe", 4096, 256, 4, 4, 256);
  std::string list;
  for (auto& n : preset_names()) list += (list.empty() ? "" : ", ") + n;
  return invalid_argument("unknown model preset '" + std::string(name) + "'; available: " + list);
}

std::vector<std::string> preset_names() {
  return {"tiny", "tiny-llama", "tiny-moe", "gpt2", "gpt2-medium", "llama-small", "bench-small", "bench-tiny", "kjv-byte", "kjv-bpe"};
}

}  // namespace tessera
