// Presets and validation of model configurations.
#include "model/config.h"

namespace tessera {

std::string_view arch_name(Arch a) { return a == Arch::gpt2 ? "gpt2" : "llama"; }

Result<Arch> parse_arch(std::string_view s) {
  if (s == "gpt2") return Arch::gpt2;
  if (s == "llama") return Arch::llama;
  return invalid_argument("unknown architecture '" + std::string(s) + "': use \"gpt2\" or \"llama\"");
}

int64_t ModelConfig::num_parameters() const {
  const int64_t C = d_model, V = vocab_size, F = d_ff, Q = qkv_width();
  const int64_t mlp_in = arch == Arch::llama ? 2 * F : F;
  int64_t per_layer = Q * C + C * n_head * head_size() + mlp_in * C + C * F;
  if (has_bias()) per_layer += Q + C + mlp_in + C + 2 * C;  // linear biases + 2 LayerNorm biases
  per_layer += 2 * C;                                         // two norm weights
  int64_t total = V * C + n_layer * per_layer + C + (has_bias() ? C : 0);
  if (learned_positions()) total += max_seq_len * C;
  if (!tied_embeddings) total += V * C;
  return total;
}

double ModelConfig::flops_per_token(int64_t T) const {
  const double C = d_model, F = d_ff, V = vocab_size, Q = qkv_width();
  const double mlp_in = arch == Arch::llama ? 2 * F : F;
  const double matmul_params = n_layer * (Q * C + C * C + mlp_in * C + C * F) + V * C;
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
  return {"tiny", "tiny-llama", "gpt2", "gpt2-medium", "llama-small", "bench-small", "bench-tiny", "kjv-byte", "kjv-bpe"};
}

}  // namespace tessera
