// Transformer forward and backward over a layer range, composed from the ops in backend/ops.h.
// GPT-2 blocks: x += proj(attn(LN1(x))); x += proj(gelu(fc(LN2(x)))).
// LLaMA blocks: the same with RMSNorm, RoPE on q/k and SwiGLU; no biases.
#include "model/transformer.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/ops.h"
#include "core/log.h"

namespace tessera {

namespace {
Buffer act_buffer(int64_t numel) {
  return Buffer(static_cast<size_t>(numel) * sizeof(float), MemCategory::activations);
}
void zero(Buffer& b) { std::memset(b.data(), 0, b.bytes()); }
}  // namespace

// Saved activations of one layer (N = B*T rows).
struct LayerActs {
  Buffer ln1, ln1_mean, ln1_rstd;  // (N,C) (N) (N)
  Buffer qkv;                      // (N, (NH+2NKV)*HS), after RoPE
  Buffer atty;                     // (N, C) attention output before projection
  Buffer lse;                      // (B, NH, T)
  Buffer residual2;                // (N, C) x + attention branch
  Buffer ln2, ln2_mean, ln2_rstd;  // (N,C) (N) (N)
  Buffer fch;                      // (N, FC) fc output (FC = F for gpt2, 2F [gate|up] for llama)
  Buffer fch_act;                  // (N, F) after GELU / SwiGLU
  Buffer residual3;                // (N, C) layer output
};

struct Transformer::Acts {
  Buffer encoded;                  // (N, C) embedding output, or the stage input
  std::vector<LayerActs> layers;
  Buffer lnf, lnf_mean, lnf_rstd;  // (N, C) (N) (N)
  Buffer logits;                   // (N, V); holds dlogits after a forward with targets
  Buffer losses;                   // (N)
  // Backward scratch, shared by all layers.
  Buffer dresidual;                // (N, C) gradient of the residual stream
  Buffer dln;                      // (N, C)
  Buffer datty;                    // (N, C)
  Buffer dqkv;                     // (N, Q)
  Buffer dfch;                     // (N, FC)
  Buffer dfch_act;                 // (N, F)
  Buffer output_grad;              // (N, C) gradient w.r.t. the stage output (non-last stage)
  Buffer input_grad;               // (N, C) gradient w.r.t. the stage input (non-first stage)
  bool have_dlogits = false;
};

Transformer::Transformer(const ModelConfig& cfg, ParamStore& store, int64_t B, int64_t T)
    : cfg_(cfg), store_(store), B_(B), T_(T),
      first_(store.layout().first_layer()), last_(store.layout().last_layer()),
      acts_(std::make_unique<Acts>()) {
  TS_CHECK(T <= cfg.max_seq_len) << "T=" << T << " exceeds max_seq_len=" << cfg.max_seq_len;
  const int64_t N = B * T, C = cfg.d_model, Q = cfg.qkv_width(), F = cfg.d_ff;
  const int64_t FC = cfg.arch == Arch::llama ? 2 * F : F;
  Acts& a = *acts_;
  a.encoded = act_buffer(N * C);
  for (int l = first_; l < last_; ++l) {
    LayerActs la;
    la.ln1 = act_buffer(N * C); la.ln1_mean = act_buffer(N); la.ln1_rstd = act_buffer(N);
    la.qkv = act_buffer(N * Q);
    la.atty = act_buffer(N * C);
    la.lse = act_buffer(B * cfg.n_head * T);
    la.residual2 = act_buffer(N * C);
    la.ln2 = act_buffer(N * C); la.ln2_mean = act_buffer(N); la.ln2_rstd = act_buffer(N);
    la.fch = act_buffer(N * FC);
    la.fch_act = act_buffer(N * F);
    la.residual3 = act_buffer(N * C);
    a.layers.push_back(std::move(la));
  }
  if (is_last_stage()) {
    a.lnf = act_buffer(N * C); a.lnf_mean = act_buffer(N); a.lnf_rstd = act_buffer(N);
    a.logits = act_buffer(N * cfg.vocab_size);
    a.losses = act_buffer(N);
  } else {
    a.output_grad = act_buffer(N * C);
  }
  if (!is_first_stage()) a.input_grad = act_buffer(N * C);
  a.dresidual = act_buffer(N * C);
  a.dln = act_buffer(N * C);
  a.datty = act_buffer(N * C);
  a.dqkv = act_buffer(N * Q);
  a.dfch = act_buffer(N * FC);
  a.dfch_act = act_buffer(N * F);
}

Transformer::~Transformer() = default;

float* Transformer::stage_input() { return acts_->encoded.as<float>(); }
const float* Transformer::stage_output() const {
  return acts_->layers.empty() ? acts_->encoded.as<float>() : acts_->layers.back().residual3.as<float>();
}
float* Transformer::stage_output_grad() { return acts_->output_grad.as<float>(); }
const float* Transformer::stage_input_grad() const { return acts_->input_grad.as<float>(); }
const float* Transformer::logits() const { return acts_->logits.as<float>(); }
const float* Transformer::losses() const { return acts_->losses.as<float>(); }

float Transformer::forward(const int32_t* tokens, const int32_t* targets) {
  const ModelConfig& c = cfg_;
  const int64_t B = B_, T = T_, N = B * T, C = c.d_model, Q = c.qkv_width(), F = c.d_ff;
  const int64_t NH = c.n_head, NKV = c.n_kv_head, HS = c.head_size();
  const bool llama = c.arch == Arch::llama;
  const int64_t FC = llama ? 2 * F : F;
  ParamStore& s = store_;
  Acts& a = *acts_;
  auto bias = [&](const std::string& name) -> const float* { return c.has_bias() ? s.param(name) : nullptr; };

  if (is_first_stage()) {
    last_tokens_ = tokens;
    ops::embedding_forward(a.encoded.as<float>(), tokens, s.param("wte"),
                           c.learned_positions() ? s.param("wpe") : nullptr, B, T, C);
  }
  const float* x = a.encoded.as<float>();
  for (int l = first_; l < last_; ++l) {
    LayerActs& la = a.layers[l - first_];
    const std::string p = "h." + std::to_string(l) + ".";
    if (llama) {
      ops::rmsnorm_forward(la.ln1.as<float>(), la.ln1_rstd.as<float>(), x, s.param(p + "ln1.w"), N, C, c.norm_eps);
    } else {
      ops::layernorm_forward(la.ln1.as<float>(), la.ln1_mean.as<float>(), la.ln1_rstd.as<float>(), x,
                             s.param(p + "ln1.w"), s.param(p + "ln1.b"), N, C, c.norm_eps);
    }
    ops::matmul_forward(la.qkv.as<float>(), la.ln1.as<float>(), s.param(p + "attn.qkv.w"), bias(p + "attn.qkv.b"),
                        N, C, Q);
    if (llama) ops::rope_forward(la.qkv.as<float>(), B, T, NH, NKV, HS, c.rope_theta);
    ops::attention_forward(la.atty.as<float>(), la.lse.as<float>(), la.qkv.as<float>(), B, T, NH, NKV, HS);
    float* r2 = la.residual2.as<float>();
    ops::matmul_forward(r2, la.atty.as<float>(), s.param(p + "attn.proj.w"), bias(p + "attn.proj.b"), N, NH * HS, C);
#pragma omp parallel for simd
    for (int64_t i = 0; i < N * C; ++i) r2[i] += x[i];
    if (llama) {
      ops::rmsnorm_forward(la.ln2.as<float>(), la.ln2_rstd.as<float>(), r2, s.param(p + "ln2.w"), N, C, c.norm_eps);
    } else {
      ops::layernorm_forward(la.ln2.as<float>(), la.ln2_mean.as<float>(), la.ln2_rstd.as<float>(), r2,
                             s.param(p + "ln2.w"), s.param(p + "ln2.b"), N, C, c.norm_eps);
    }
    ops::matmul_forward(la.fch.as<float>(), la.ln2.as<float>(), s.param(p + "mlp.fc.w"), bias(p + "mlp.fc.b"), N, C,
                        FC);
    if (llama) {
      ops::swiglu_forward(la.fch_act.as<float>(), la.fch.as<float>(), N, F);
    } else {
      ops::gelu_forward(la.fch_act.as<float>(), la.fch.as<float>(), N * F);
    }
    float* r3 = la.residual3.as<float>();
    ops::matmul_forward(r3, la.fch_act.as<float>(), s.param(p + "mlp.proj.w"), bias(p + "mlp.proj.b"), N, F, C);
#pragma omp parallel for simd
    for (int64_t i = 0; i < N * C; ++i) r3[i] += r2[i];
    x = r3;
  }
  a.have_dlogits = false;
  if (!is_last_stage()) return 0.f;

  if (llama) {
    ops::rmsnorm_forward(a.lnf.as<float>(), a.lnf_rstd.as<float>(), x, s.param("lnf.w"), N, C, c.norm_eps);
  } else {
    ops::layernorm_forward(a.lnf.as<float>(), a.lnf_mean.as<float>(), a.lnf_rstd.as<float>(), x, s.param("lnf.w"),
                           s.param("lnf.b"), N, C, c.norm_eps);
  }
  const float* head = c.tied_embeddings ? s.param("wte") : s.param("lm_head.w");
  ops::matmul_forward(a.logits.as<float>(), a.lnf.as<float>(), head, nullptr, N, C, c.vocab_size);
  if (!targets) return 0.f;

  int64_t valid = 0;
  for (int64_t i = 0; i < N; ++i) valid += targets[i] >= 0;
  loss_valid_count_ = static_cast<float>(valid);
  const float dscale = valid > 0 ? 1.f / static_cast<float>(valid) : 0.f;
  ops::softmax_crossentropy(a.losses.as<float>(), a.logits.as<float>(), targets, N, c.vocab_size,
                            dscale == 0.f ? 1e-30f : dscale);
  a.have_dlogits = true;
  double sum = 0;
  const float* losses = a.losses.as<float>();
  for (int64_t i = 0; i < N; ++i) sum += losses[i];
  return valid > 0 ? static_cast<float>(sum / static_cast<double>(valid)) : 0.f;
}

void Transformer::backward(float loss_scale) {
  const ModelConfig& c = cfg_;
  const int64_t B = B_, T = T_, N = B * T, C = c.d_model, Q = c.qkv_width(), F = c.d_ff;
  const int64_t NH = c.n_head, NKV = c.n_kv_head, HS = c.head_size();
  const bool llama = c.arch == Arch::llama;
  const int64_t FC = llama ? 2 * F : F;
  ParamStore& s = store_;
  Acts& a = *acts_;
  auto dbias = [&](const std::string& name) -> float* { return c.has_bias() ? s.grad(name) : nullptr; };
  float* dres = a.dresidual.as<float>();
  zero(a.dresidual);

  if (is_last_stage()) {
    TS_CHECK(a.have_dlogits) << "backward() needs a preceding forward() with targets";
    float* dlogits = a.logits.as<float>();
    const int64_t NV = N * c.vocab_size;
    if (loss_scale != 1.f) {
#pragma omp parallel for simd
      for (int64_t i = 0; i < NV; ++i) dlogits[i] *= loss_scale;
    }
    const float* x_last = a.layers.empty() ? a.encoded.as<float>() : a.layers.back().residual3.as<float>();
    const bool tied = c.tied_embeddings;
    zero(a.dln);
    ops::matmul_backward(a.dln.as<float>(), tied ? s.grad("wte") : s.grad("lm_head.w"), nullptr, dlogits,
                         a.lnf.as<float>(), tied ? s.param("wte") : s.param("lm_head.w"), N, C, c.vocab_size);
    if (llama) {
      ops::rmsnorm_backward(dres, s.grad("lnf.w"), a.dln.as<float>(), x_last, s.param("lnf.w"),
                            a.lnf_rstd.as<float>(), N, C);
    } else {
      ops::layernorm_backward(dres, s.grad("lnf.w"), s.grad("lnf.b"), a.dln.as<float>(), x_last, s.param("lnf.w"),
                              a.lnf_mean.as<float>(), a.lnf_rstd.as<float>(), N, C);
    }
    a.have_dlogits = false;  // the logits buffer now holds scaled gradients: one backward per forward
    if (grad_ready_) grad_ready_(static_cast<int>(c.n_layer));
  } else {
    std::memcpy(dres, a.output_grad.data(), a.dresidual.bytes());
  }

  for (int l = last_ - 1; l >= first_; --l) {
    LayerActs& la = a.layers[l - first_];
    const std::string p = "h." + std::to_string(l) + ".";
    const float* x = l == first_ ? a.encoded.as<float>() : a.layers[l - first_ - 1].residual3.as<float>();
    // MLP branch: residual3 = residual2 + proj(act(fc(norm2(residual2)))); dres carries d residual3.
    zero(a.dfch_act);
    ops::matmul_backward(a.dfch_act.as<float>(), s.grad(p + "mlp.proj.w"), dbias(p + "mlp.proj.b"), dres,
                         la.fch_act.as<float>(), s.param(p + "mlp.proj.w"), N, F, C);
    zero(a.dfch);
    if (llama) {
      ops::swiglu_backward(a.dfch.as<float>(), a.dfch_act.as<float>(), la.fch.as<float>(), N, F);
    } else {
      ops::gelu_backward(a.dfch.as<float>(), la.fch.as<float>(), a.dfch_act.as<float>(), N * F);
    }
    zero(a.dln);
    ops::matmul_backward(a.dln.as<float>(), s.grad(p + "mlp.fc.w"), dbias(p + "mlp.fc.b"), a.dfch.as<float>(),
                         la.ln2.as<float>(), s.param(p + "mlp.fc.w"), N, C, FC);
    if (llama) {
      ops::rmsnorm_backward(dres, s.grad(p + "ln2.w"), a.dln.as<float>(), la.residual2.as<float>(),
                            s.param(p + "ln2.w"), la.ln2_rstd.as<float>(), N, C);
    } else {
      ops::layernorm_backward(dres, s.grad(p + "ln2.w"), s.grad(p + "ln2.b"), a.dln.as<float>(),
                              la.residual2.as<float>(), s.param(p + "ln2.w"), la.ln2_mean.as<float>(),
                              la.ln2_rstd.as<float>(), N, C);
    }
    // Attention branch: residual2 = x + proj(attn(rope(qkv(norm1(x))))); dres now carries d residual2.
    zero(a.datty);
    ops::matmul_backward(a.datty.as<float>(), s.grad(p + "attn.proj.w"), dbias(p + "attn.proj.b"), dres,
                         la.atty.as<float>(), s.param(p + "attn.proj.w"), N, NH * HS, C);
    zero(a.dqkv);
    ops::attention_backward(a.dqkv.as<float>(), a.datty.as<float>(), la.qkv.as<float>(), la.atty.as<float>(),
                            la.lse.as<float>(), B, T, NH, NKV, HS);
    if (llama) ops::rope_backward(a.dqkv.as<float>(), B, T, NH, NKV, HS, c.rope_theta);
    zero(a.dln);
    ops::matmul_backward(a.dln.as<float>(), s.grad(p + "attn.qkv.w"), dbias(p + "attn.qkv.b"), a.dqkv.as<float>(),
                         la.ln1.as<float>(), s.param(p + "attn.qkv.w"), N, C, Q);
    if (llama) {
      ops::rmsnorm_backward(dres, s.grad(p + "ln1.w"), a.dln.as<float>(), x, s.param(p + "ln1.w"),
                            la.ln1_rstd.as<float>(), N, C);
    } else {
      ops::layernorm_backward(dres, s.grad(p + "ln1.w"), s.grad(p + "ln1.b"), a.dln.as<float>(), x,
                              s.param(p + "ln1.w"), la.ln1_mean.as<float>(), la.ln1_rstd.as<float>(), N, C);
    }
    if (grad_ready_) grad_ready_(l);
  }

  if (is_first_stage()) {
    ops::embedding_backward(s.grad("wte"), c.learned_positions() ? s.grad("wpe") : nullptr, dres, last_tokens_, B, T,
                            C);
    if (grad_ready_) grad_ready_(-1);
  } else {
    std::memcpy(a.input_grad.data(), dres, a.dresidual.bytes());
  }
}

}  // namespace tessera
