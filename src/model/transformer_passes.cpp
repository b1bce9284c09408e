// Transformer forward and backward over a layer range, composed from the ops in backend/ops.h.
// GPT-2 blocks: x += proj(attn(LN1(x))); x += proj(gelu(fc(LN2(x)))).
// LLaMA blocks: the same with RMSNorm, RoPE on q/k and SwiGLU; no biases.
// Tensor parallelism (tp size p > 1, Megatron): each rank runs NH/p heads, NKV/p KV heads, d_ff/p
// of the MLP and V/p (padded) of the vocabulary; the hooks combine the partial results. Sequence
// parallelism additionally splits the rows of the norms and residual stream (transformer.h).
// Recomputation (recompute.h): layers keep only part of their activations (layer_view points the
// rest at one shared set) and backward re-runs the attention kernel or layer_forward before a
// layer's backward.
#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/log.h"
#include "model/linear_precision.h"
#include "model/transformer_state.h"

namespace tessera {

namespace {
void zero(Backend& be, Buffer& b) {
  TS_CHECK(b.bytes() % sizeof(float) == 0) << "activation of " << b.bytes() << " bytes is not floats";
  be.fill(b.as<float>(), static_cast<int64_t>(b.bytes() / sizeof(float)), 0.0f);
}
// out = norm(inp): LayerNorm (gpt2) or RMSNorm (llama).
void norm_forward(Backend& be, bool rms, float* out, float* mean, float* rstd, const float* inp, const float* w,
                  const float* b, int64_t N, int64_t C, float eps) {
  if (rms) be.rmsnorm_forward(out, rstd, inp, w, N, C, eps);
  else be.layernorm_forward(out, mean, rstd, inp, w, b, N, C, eps);
}
void norm_backward(Backend& be, bool rms, float* dinp, float* dw, float* db, const float* dout, const float* inp,
                   const float* w, const float* mean, const float* rstd, int64_t N, int64_t C) {
  if (rms) be.rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C);
  else be.layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
}
// The input of a column-parallel linear in forward: the saved norm output (NS rows), all N rows on
// return. Under sequence parallelism `full` is the (N, C) scratch its rows are gathered into (at
// row R0); else `full` is null and the input is `saved` itself.
float* column_input_forward(Backend& be, TensorParallelHooks& tp, float* full, float* saved, TpPoint point, int layer,
                            int64_t N, int64_t C, int64_t NS, int64_t R0) {
  float* in = full ? full : saved;  // (N, C)
  if (full) be.copy(in + R0 * C, saved, NS * C);
  tp.copy_to_region_forward({point, layer, in, N, C});
  return in;
}
}  // namespace

Transformer::Dims Transformer::dims() const {
  const ModelConfig& c = cfg_;
  const bool llama = c.arch == Arch::llama;
  const int64_t p = tp_size_, NH = c.n_head / p, NKV = c.n_kv_head / p, HS = c.head_size(), F = c.d_ff / p;
  const int64_t V = store_.layout().padded_vocab_size() / p;  // == vocab_size at p = 1
  const int64_t N = B_ * T_, NS = sp_ ? N / p : N, R0 = sp_ ? tp_rank_ * NS : 0;
  return {B_, T_, N, c.d_model, (NH + 2 * NKV) * HS, NH * HS, F, llama ? 2 * F : F, NH, NKV, HS, V, NS, R0, llama};
}

void Transformer::layer_forward(int l, const float* x, const LayerView& v, bool mlp_output) {
  const ModelConfig& c = cfg_;
  const Dims d = dims();
  const int64_t B = d.B, T = d.T, N = d.N, C = d.C, Q = d.Q, A = d.A, F = d.F, FC = d.FC;
  const int64_t NH = d.NH, NKV = d.NKV, HS = d.HS, NS = d.NS, R0 = d.R0;
  const bool llama = d.llama;
  const TensorPtrs& p = w_->p[l - first_];
  OpProfile& prof = profile_;
  TensorParallelHooks& tp = *tp_;
  // A row-parallel linear's bias is replicated: added by rank 0 only, so the reduction adds it once.
  auto row_bias = [&](const float* b) { return tp_rank_ == 0 ? b : nullptr; };
  float* full = sp_ ? acts_->full.as<float>() : nullptr;
  auto column_input = [&](float* saved, TpPoint point) {
    return column_input_forward(be_, tp, full, saved, point, l, N, C, NS, R0);
  };
  float *ln1 = v.ln1, *qkv = v.qkv, *atty = v.atty, *r2 = v.r2, *ln2 = v.ln2, *fch = v.fch, *fch_act = v.fch_act;
  float* r3 = v.r3;
  profiled(prof, OpGroup::norm, [&] {
    norm_forward(be_, llama, ln1, v.ln1_mean, v.ln1_rstd, x, p.ln1_w, p.ln1_b, NS, C, c.norm_eps);
  });
  probe(ModelPass::forward, l, 0, "ln1", ln1, NS * C);
  const float* qkv_in = column_input(ln1, TpPoint::attn_qkv);
  // Ulysses: the linear's output stays at this rank's positions; v.qkv gets its head split.
  const bool ulysses = cp_ && !cp_ring_;
  float* qkv_out = ulysses ? acts_->cp_qkv.as<float>() : qkv;
  profiled(prof, OpGroup::matmul, [&] { linear_forward(be_, precision_, qkv_out, qkv_in, p.qkv_w, p.qkv_b, N, C, Q); });
  probe(ModelPass::forward, l, 1, "qkv", qkv_out, N * Q);
  profiled(prof, OpGroup::attention, [&] {
    if (ulysses) {
      cp_attention_forward(v, qkv_out, atty);
      return;
    }
    if (cp_ring_) {
      if (llama)
        for_each_position_piece([&](int64_t row0, int64_t Tp, int64_t pos0) {
          be_.rope_forward_at(qkv + row0 * Q, B, Tp, pos0, NH, NKV, HS, c.rope_theta);
        });
      ring_attention_forward(v);
      return;
    }
    if (llama) be_.rope_forward(qkv, B, T, NH, NKV, HS, c.rope_theta);
    be_.attention_forward(atty, v.lse, qkv, B, T, NH, NKV, HS);
  });
  probe(ModelPass::forward, l, 2, "attention", atty, N * A);
  float* y = sp_ ? full : r2;  // (N, C) partial sums; this rank's rows summed after the hook
  profiled(prof, OpGroup::matmul, [&] { linear_forward(be_, precision_, y, atty, p.proj_w, row_bias(p.proj_b), N, A, C); });
  tp.reduce_from_region_forward({TpPoint::attn_proj, l, y, N, C});
  profiled(prof, OpGroup::residual, [&] { be_.add(r2, y + R0 * C, x, NS * C); });
  probe(ModelPass::forward, l, 3, "attn_proj", r2, NS * C);
  profiled(prof, OpGroup::norm, [&] {
    norm_forward(be_, llama, ln2, v.ln2_mean, v.ln2_rstd, r2, p.ln2_w, p.ln2_b, NS, C, c.norm_eps);
  });
  probe(ModelPass::forward, l, 4, "ln2", ln2, NS * C);
  const bool dense = c.has_dense_mlp(l), moe = c.is_moe_layer(l);
  if (dense) {
    const float* fc_in = column_input(ln2, TpPoint::mlp_fc);
    profiled(prof, OpGroup::matmul, [&] { linear_forward(be_, precision_, fch, fc_in, p.fc_w, p.fc_b, N, C, FC); });
    probe(ModelPass::forward, l, 5, "mlp_fc", fch, N * FC);
    profiled(prof, OpGroup::activation, [&] {
      if (llama) be_.swiglu_forward(fch_act, fch, N, F);
      else be_.gelu_forward(fch_act, fch, N * F);
    });
    probe(ModelPass::forward, l, 6, "activation", fch_act, N * F);
  }
  if (!mlp_output) return;  // full recomputation: a MoE layer's expert activations are kept, not recomputed
  if (dense) {
    y = sp_ ? full : r3;
    profiled(prof, OpGroup::matmul, [&] { linear_forward(be_, precision_, y, fch_act, p.mproj_w, row_bias(p.mproj_b), N, F, C); });
    tp.reduce_from_region_forward({TpPoint::mlp_proj, l, y, N, C});
    profiled(prof, OpGroup::residual, [&] { be_.add(r3, y + R0 * C, r2, NS * C); });
  }
  if (moe) {  // whole on every tp rank (sequence parallelism is refused with MoE): N rows, no tp hooks
    float* out = acts_->moe_out.as<float>();
    moe_forward(l, ln2, out);
    probe(ModelPass::forward, l, 7, "moe", out, N * C);
    profiled(prof, OpGroup::residual, [&] { be_.add(r3, out, dense ? r3 : r2, N * C); });
  }
  probe(ModelPass::forward, l, 8, "mlp_proj", r3, NS * C);
}

float Transformer::forward(const int32_t* tokens, const int32_t* targets) {
  if (!targets || !is_last_stage()) {
    forward(tokens, targets, nullptr);
    return 0.f;
  }
  Buffer& buffer = acts_->loss_scratch;  // allocated at the first loss read (eval, sample), outside the plan
  if (!buffer.data()) buffer = be_.allocate(sizeof(double), MemCategory::other);
  auto* scratch = buffer.as<double>();
  be_.fill_f64(scratch, 1, 0.0);
  forward(tokens, targets, scratch);
  double loss = 0;
  be_.copy_to_host(&loss, scratch, sizeof loss);
  return static_cast<float>(loss);  // exact: 0 + the f32 mean
}

// The batch crosses the host/device line here (tokens in): a device backend's ops read its own
// copy; the CPU's read the caller's array.
const int32_t* Transformer::batch_on_device(Buffer& copy, const int32_t* host, int64_t n) {
  if (host == nullptr || be_.device() == Device::cpu) return host;
  const size_t bytes = static_cast<size_t>(n) * sizeof(int32_t);
  if (copy.bytes() < bytes) copy = be_.allocate(bytes, MemCategory::activations);
  be_.copy_to_device(copy.data(), host, bytes);
  return copy.as<int32_t>();
}

void Transformer::forward(const int32_t* host_tokens, const int32_t* targets, double* loss_sum) {
  const ModelConfig& c = cfg_;
  const Dims d = dims();
  const int64_t B = d.B, N = d.N, C = d.C, V = d.V, NS = d.NS, R0 = d.R0;
  const bool llama = d.llama;
  const Weights& w = *w_;
  Acts& a = *acts_;
  const int32_t* tokens = is_first_stage() ? batch_on_device(a.tokens_on_device, host_tokens, N) : host_tokens;
  const int32_t* device_targets =
      targets && is_last_stage() ? batch_on_device(a.targets_on_device, targets, N) : targets;
  OpProfile& prof = profile_;
  check_tp_hooks();
  // A row-parallel linear's bias is replicated: added by rank 0 only, so the reduction adds it once.
  auto row_bias = [&](const float* b) { return tp_rank_ == 0 ? b : nullptr; };
  // Sequence parallelism: whole (N, C) activations pass through one scratch buffer. Without it the
  // norms write their N rows straight into the saved buffer, and row-parallel outputs land in the
  // residual buffer, as before.
  float* full = sp_ ? a.full.as<float>() : nullptr;
  auto column_input = [&](float* saved, TpPoint point, int layer) {
    return column_input_forward(be_, *tp_, full, saved, point, layer, N, C, NS, R0);
  };

  TensorParallelHooks& tp = *tp_;
  float* encoded = a.encoded.as<float>();  // (NS, C)
  if (is_first_stage()) {
    last_tokens_ = tokens;
    event(LayerEvent::before_forward, -1);
    float* emb = sp_ ? full : encoded;  // (N, C)
    profiled(prof, OpGroup::embedding, [&] {
      for_each_position_piece([&](int64_t row0, int64_t Tp, int64_t pos0) {
        const float* wpe = w.wpe ? w.wpe + pos0 * C : nullptr;
        if (tp_size_ == 1) be_.embedding_forward(emb + row0 * C, tokens + row0, w.wte, wpe, B, Tp, C);
        else be_.embedding_forward_range(emb + row0 * C, tokens + row0, w.wte, row_bias(wpe), B, Tp, C, vocab_lo_,
                                          vocab_lo_ + V);  // positions added once, like a row-parallel bias
      });
    });
    event(LayerEvent::after_forward, -1);
    tp.reduce_from_region_forward({TpPoint::embedding, -1, emb, N, C});
    if (sp_) be_.copy(encoded, emb + R0 * C, NS * C);
    probe(ModelPass::forward, -1, 0, "embedding", encoded, NS * C);
  } else if (sp_) {
    be_.copy(encoded, a.stage_in.as<float>() + R0 * C, NS * C);  // this rank's rows of the whole input
  }
  const float* x = encoded;  // (NS, C) the residual stream
  for (int l = first_; l < last_; ++l) {
    event(LayerEvent::before_forward, l);
    const LayerView v = layer_view(l);
    layer_forward(l, x, v, /*mlp_output=*/true);
    x = v.r3;
    event(LayerEvent::after_forward, l);
  }
  a.have_dlogits = false;
  if (!is_last_stage()) {
    if (sp_) {  // the next stage gets the whole output
      float* out = a.stage_out.as<float>();
      be_.copy(out + R0 * C, x, NS * C);
      tp.sequence_gather({TpPoint::stage_output, last_ - 1, out, N, C});
    }
    return;
  }

  const int L = static_cast<int>(c.n_layer);
  event(LayerEvent::before_forward, L);
  float* lnf = a.lnf.as<float>();
  float* logits = a.logits.as<float>();
  profiled(prof, OpGroup::norm, [&] {
    norm_forward(be_, llama, lnf, a.lnf_mean.as<float>(), a.lnf_rstd.as<float>(), x, w.lnf_w, w.lnf_b, NS, C, c.norm_eps);
  });
  probe(ModelPass::forward, L, 0, "final_norm", lnf, NS * C);
  const float* head_in = column_input(lnf, TpPoint::lm_head, L);
  profiled(prof, OpGroup::matmul, [&] { linear_forward(be_, precision_, logits, head_in, w.head, nullptr, N, C, V); });
  probe(ModelPass::forward, L, 1, "head", logits, N * V);
  event(LayerEvent::after_forward, L);
  if (!targets) return;

  int64_t valid = 0;
  for (int64_t i = 0; i < N; ++i) {
    valid += targets[i] >= 0;
    TS_CHECK(targets[i] < c.vocab_size) << "target " << targets[i] << " out of range for vocabulary size "
                                        << c.vocab_size << " (row " << i << ")";
  }
  // With no valid target the gradient is zero; a tiny non-zero scale keeps the op in gradient mode.
  const float dscale = valid > 0 ? 1.f / static_cast<float>(valid) : 1e-30f;
  if (tp_size_ == 1) {
    // Where the vocabulary-parallel loss reduces its row statistics; the fused op needs none at tp 1.
    tp.cross_entropy_max({TpPoint::loss, L, nullptr, N, 1});
    tp.cross_entropy_sum({TpPoint::loss, L, nullptr, N, 2});
    profiled(prof, OpGroup::loss, [&] {
      be_.softmax_crossentropy(a.losses.as<float>(), logits, device_targets, N, c.vocab_size, dscale);
    });
  } else {
    // Vocabulary-parallel: global row max, then global [sum exp, target logit], then the local dlogits.
    float *mx = a.ce_max.as<float>(), *stats = a.ce_stats.as<float>();
    const int64_t lo = vocab_lo_, real = vocab_valid_;
    profiled(prof, OpGroup::loss, [&] { be_.crossentropy_rowmax(mx, logits, N, V, real); });
    tp.cross_entropy_max({TpPoint::loss, L, mx, N, 1});
    profiled(prof, OpGroup::loss, [&] { be_.crossentropy_sumexp_target(stats, logits, mx, device_targets, N, V, real, lo); });
    tp.cross_entropy_sum({TpPoint::loss, L, stats, N, 2});
    profiled(prof, OpGroup::loss, [&] {
      be_.crossentropy_finish(a.losses.as<float>(), logits, stats, mx, device_targets, N, V, real, lo, dscale);
    });
  }
  a.have_dlogits = true;
  probe(ModelPass::forward, L, 2, "loss", a.losses.as<float>(), N);
  be_.accumulate_mean_loss(loss_sum, a.losses.as<float>(), N, valid);
}

void Transformer::backward(float loss_scale) {
  const ModelConfig& c = cfg_;
  const Dims d = dims();
  const int64_t B = d.B, T = d.T, N = d.N, C = d.C, Q = d.Q, A = d.A, F = d.F, FC = d.FC, V = d.V;
  const int64_t NH = d.NH, NKV = d.NKV, HS = d.HS, NS = d.NS, R0 = d.R0;
  const bool llama = d.llama;
  const Weights& w = *w_;
  Acts& a = *acts_;
  OpProfile& prof = profile_;
  check_tp_hooks();
  // dres_full (N, C): the residual stream's gradient; this rank's rows dres (NS, C) are where the
  // norms' backward accumulates (all of it without sequence parallelism). Under sequence
  // parallelism the reduce_from_region backward hooks all-gather the other rows in place.
  float* dres_full = a.dresidual.as<float>();
  float* dres = dres_full + R0 * C;
  float *dln = a.dln.as<float>(), *datty = a.datty.as<float>(), *dqkv = a.dqkv.as<float>();
  float *dfch = a.dfch.as<float>(), *dfch_act = a.dfch_act.as<float>();
  zero(be_, a.dresidual);
  TensorParallelHooks& tp = *tp_;
  const int L = static_cast<int>(c.n_layer);
  // Under sequence parallelism only rank 0 takes the gradient of what only rank 0 added (the
  // row-parallel biases, wpe); without it every rank gets the same whole gradient, as before.
  auto rank0_grad = [&](float* g) { return sp_ && tp_rank_ != 0 ? nullptr : g; };
  // A split backward leaves the linear layers' weight and bias gradients to backward_weights(),
  // which finds each output gradient where it is (dlogits) or where `kept` copies it
  // (transformer_split_backward.cpp); the grad-ready callback is then that pass's.
  const bool split = split_backward_;
  auto now = [&](float* g) { return split ? nullptr : g; };
  auto layer_done = [&](int layer) {
    if (!split) grad_ready(layer);
  };
  // The input of a column-parallel linear for its weight gradient: the saved norm output (NS rows),
  // all-gathered again under sequence parallelism.
  auto column_input = [&](const float* saved, TpPoint point, int layer) -> const float* {
    if (!sp_) return saved;
    float* in = a.full.as<float>();
    be_.copy(in + R0 * C, saved, NS * C);
    tp_->sequence_gather({point, layer, in, N, C});
    return in;
  };

  if (is_last_stage()) {
    TS_CHECK(a.have_dlogits) << "backward() needs a preceding forward() with targets";
    event(LayerEvent::before_backward, L);
    float* dlogits = a.logits.as<float>();
    const int64_t NV = N * V;
    if (loss_scale != 1.f) profiled(prof, OpGroup::loss, [&] { be_.scale_inplace(dlogits, NV, loss_scale); });
    const float* x_last = a.layers.empty() ? a.encoded.as<float>() : a.layers.back().residual3.as<float>();
    const float* head_in = column_input(a.lnf.as<float>(), TpPoint::lm_head, L);
    zero(be_, a.dln);
    profiled(prof, OpGroup::matmul, [&] {
      linear_backward(be_, precision_, dln, now(w.dhead), nullptr, dlogits, head_in, w.head, N, C, V);
    });
    tp.copy_to_region_backward({TpPoint::lm_head, L, dln, N, C});
    probe(ModelPass::backward, L, 0, "head", dln, N * C);
    profiled(prof, OpGroup::norm, [&] {
      norm_backward(be_, llama, dres, w.dlnf_w, w.dlnf_b, dln + R0 * C, x_last, w.lnf_w, a.lnf_mean.as<float>(),
                    a.lnf_rstd.as<float>(), NS, C);
    });
    probe(ModelPass::backward, L, 1, "final_norm", dres, NS * C);
    a.have_dlogits = false;  // the logits buffer now holds scaled gradients: one backward per forward
    layer_done(L);
  } else {
    be_.copy(dres, a.output_grad.as<float>() + R0 * C, NS * C);
  }

  for (int l = last_ - 1; l >= first_; --l) {
    event(LayerEvent::before_backward, l);
    const LayerView v = layer_view(l);
    const TensorPtrs& p = w.p[l - first_];
    const TensorPtrs& g = w.g[l - first_];
    const float* x = layer_input(l);
    // Recomputation, after before_backward (the layer's parameters are available) and without layer
    // events: the same ops on the same inputs give the forward's bits.
    if (recompute_ == Recompute::full) {
      recomputing_ = true;
      layer_forward(l, x, v, /*mlp_output=*/false);
      recomputing_ = false;
    } else if (recompute_ == Recompute::selective) {
      profiled(prof, OpGroup::attention, [&] {
        if (!cp_) {
          be_.attention_forward(v.atty, v.lse, v.qkv, B, T, NH, NKV, HS);
          return;
        }
        if (cp_ring_) {  // v.qkv holds this rank's pieces, RoPE applied
          ring_attention_forward(v);
          return;
        }
        const int64_t p = cp_size_;  // v.qkv holds the head split, RoPE applied
        be_.attention_forward(v.atty_heads, v.lse, v.qkv, B, T * p, NH / p, NKV / p, HS);
        cp_exchange(v.atty_heads, v.atty, acts_->atty_to_seq);
      });
    }
    // MLP branch: residual3 = residual2 + proj(act(fc(norm2(residual2)))) (dense or shared expert)
    // + moe(norm2(residual2)) (MoE layers); dres carries d residual3.
    Acts::LinearOutputGrads* kept = split ? &a.deferred[static_cast<size_t>(l - first_)] : nullptr;
    if (c.has_dense_mlp(l)) {
      tp.reduce_from_region_backward({TpPoint::mlp_proj, l, dres_full, N, C});
      if (kept) be_.copy(kept->d_mproj, dres_full, N * C);
      zero(be_, a.dfch_act);
      profiled(prof, OpGroup::matmul, [&] {
        linear_backward(be_, precision_, dfch_act, now(g.mproj_w), now(rank0_grad(g.mproj_b)), dres_full, v.fch_act,
                        p.mproj_w, N, F, C);
      });
      probe(ModelPass::backward, l, 0, "mlp_proj", dfch_act, N * F);
      zero(be_, a.dfch);
      profiled(prof, OpGroup::activation, [&] {
        if (llama) be_.swiglu_backward(dfch, dfch_act, v.fch, N, F);
        else be_.gelu_backward(dfch, v.fch, dfch_act, N * F);
      });
      probe(ModelPass::backward, l, 1, "activation", dfch, N * FC);
      const float* fc_in = column_input(v.ln2, TpPoint::mlp_fc, l);
      zero(be_, a.dln);
      if (kept) be_.copy(kept->d_fc, dfch, N * FC);
      profiled(prof, OpGroup::matmul, [&] {
        linear_backward(be_, precision_, dln, now(g.fc_w), now(g.fc_b), dfch, fc_in, p.fc_w, N, C, FC);
      });
      tp.copy_to_region_backward({TpPoint::mlp_fc, l, dln, N, C});
      probe(ModelPass::backward, l, 2, "mlp_fc", dln, N * C);
    } else {
      zero(be_, a.dln);
    }
    if (c.is_moe_layer(l)) {
      moe_backward(l, v.ln2, dres_full, dln, loss_scale);
      probe(ModelPass::backward, l, 3, "moe", dln, N * C);
    }
    profiled(prof, OpGroup::norm, [&] {
      norm_backward(be_, llama, dres, g.ln2_w, g.ln2_b, dln + R0 * C, v.r2, p.ln2_w, v.ln2_mean, v.ln2_rstd, NS, C);
    });
    probe(ModelPass::backward, l, 4, "ln2", dres, NS * C);
    // Attention branch: residual2 = x + proj(attn(rope(qkv(norm1(x))))); dres now carries d residual2.
    // Under tp, dres is the same on every rank, so every rank accumulates the replicated proj bias's
    // gradient (and the norms'): replicated parameters get identical gradients everywhere (under
    // sequence parallelism: partial ones, see rank0_grad and the norms' NS rows).
    tp.reduce_from_region_backward({TpPoint::attn_proj, l, dres_full, N, C});
    if (kept) be_.copy(kept->d_proj, dres_full, N * C);
    zero(be_, a.datty);
    profiled(prof, OpGroup::matmul, [&] {
      linear_backward(be_, precision_, datty, now(g.proj_w), now(rank0_grad(g.proj_b)), dres_full, v.atty, p.proj_w,
                      N, A, C);
    });
    probe(ModelPass::backward, l, 5, "attn_proj", datty, N * A);
    zero(be_, a.dqkv);
    profiled(prof, OpGroup::attention, [&] {
      if (cp_ring_) {
        ring_attention_backward(v, datty, dqkv);
        if (llama)
          for_each_position_piece([&](int64_t row0, int64_t Tp, int64_t pos0) {
            be_.rope_backward_at(dqkv + row0 * Q, B, Tp, pos0, NH, NKV, HS, c.rope_theta);
          });
        return;
      }
      if (cp_) {
        cp_attention_backward(v, datty, dqkv);
        return;
      }
      be_.attention_backward(dqkv, datty, v.qkv, v.atty, v.lse, B, T, NH, NKV, HS);
      if (llama) be_.rope_backward(dqkv, B, T, NH, NKV, HS, c.rope_theta);
    });
    probe(ModelPass::backward, l, 6, "attention", dqkv, N * Q);
    const float* qkv_in = column_input(v.ln1, TpPoint::attn_qkv, l);
    if (kept) be_.copy(kept->d_qkv, dqkv, N * Q);
    zero(be_, a.dln);
    profiled(prof, OpGroup::matmul, [&] {
      linear_backward(be_, precision_, dln, now(g.qkv_w), now(g.qkv_b), dqkv, qkv_in, p.qkv_w, N, C, Q);
    });
    tp.copy_to_region_backward({TpPoint::attn_qkv, l, dln, N, C});
    probe(ModelPass::backward, l, 7, "qkv", dln, N * C);
    profiled(prof, OpGroup::norm, [&] {
      norm_backward(be_, llama, dres, g.ln1_w, g.ln1_b, dln + R0 * C, x, p.ln1_w, v.ln1_mean, v.ln1_rstd, NS, C);
    });
    probe(ModelPass::backward, l, 8, "ln1", dres, NS * C);
    layer_done(l);
  }

  if (is_first_stage()) {
    event(LayerEvent::before_backward, -1);
    tp.reduce_from_region_backward({TpPoint::embedding, -1, dres_full, N, C});
    profiled(prof, OpGroup::embedding, [&] {
      for_each_position_piece([&](int64_t row0, int64_t Tp, int64_t pos0) {
        float* dwpe = w.dwpe ? w.dwpe + pos0 * C : nullptr;
        const float* dout = dres_full + row0 * C;
        if (tp_size_ == 1) be_.embedding_backward(w.dwte, dwpe, dout, last_tokens_ + row0, B, Tp, C);
        else  // this rank's vocabulary rows; dwpe on every rank (replicated), on rank 0 under sequence parallelism
          be_.embedding_backward_range(w.dwte, rank0_grad(dwpe), dout, last_tokens_ + row0, B, Tp, C, vocab_lo_,
                                        vocab_lo_ + V);
      });
    });
    layer_done(-1);
  } else {
    if (sp_) tp.sequence_gather({TpPoint::stage_input, first_, dres_full, N, C});
    be_.copy(a.input_grad.as<float>(), dres_full, N * C);
  }
}

}  // namespace tessera
