// The activation buffers and the page size of the allocation replay (plan/memory_replay.h).
#include "plan/memory_replay.h"

#include <algorithm>

#include <unistd.h>

namespace tessera::memory_replay {

// ---- activations (model/transformer.cpp: struct Acts, allocate_activations) ----

namespace {
struct ActDims {
  int64_t B, T, N, C, Q, A, F, FC, NH, V, NS;
};

ActDims act_dims(const ModelConfig& c, const ParamLayout& layout, int64_t B, int64_t T, bool sp) {
  const int64_t p = layout.tp().size, NH = c.n_head / p, NKV = c.n_kv_head / p, HS = c.head_size(), F = c.d_ff / p;
  const int64_t N = B * T;
  const bool llama = c.arch == Arch::llama;
  return {B, T, N, c.d_model, (NH + 2 * NKV) * HS, NH * HS, F, llama ? 2 * F : F, NH,
          layout.padded_vocab_size() / p, sp ? N / p : N};
}

}  // namespace

// The buffers allocate_activations makes, each as a number of floats (zero-sized ones allocate nothing).
std::vector<int64_t> activation_buffers(const ModelConfig& c, const ParamLayout& layout, int64_t B, int64_t T,
                                        bool sp, Recompute recompute, int cp, bool ring, int ep, bool split) {
  const ActDims d = act_dims(c, layout, B, T, sp && layout.tp().size > 1);
  const bool first = layout.holds_embedding(), last = layout.holds_head();
  const int64_t N = d.N, NS = d.NS, C = d.C;
  const int layers = layout.last_layer() - layout.first_layer();
  const bool ulysses = cp > 1 && !ring;
  std::vector<int64_t> f;
  f.push_back(NS * C);  // encoded
  // One layer's saved tensors, in struct LayerActs order.
  auto layer_saved = [&](std::vector<int64_t>& out) {
    out.insert(out.end(), {NS * C, NS, NS,      // ln1, mean, rstd
                           N * d.Q,             // qkv
                           N * d.A});           // atty
    if (ulysses) out.push_back(N * d.A);        // atty_heads
    out.insert(out.end(), {d.B * d.NH * d.T,    // lse
                           NS * C,              // residual2
                           NS * C, NS, NS,      // ln2, mean, rstd
                           N * d.FC, N * d.F,   // fch, fch_act
                           NS * C});            // residual3
  };
  // A MoE layer's routing and expert activations (struct MoeActs order; kept under every
  // recomputation mode), right after its own buffers. int32 counts as one float, int64 as two.
  const int64_t E = c.moe_experts, K = c.moe_top_k, MF = c.d_ff, cap = c.moe_capacity(N);
  const int64_t S = cap > 0 ? std::min(N * K, E * cap) : N * K;  // Transformer::moe_slots
  const int64_t R = ep * S;  // Transformer::moe_expert_rows: what the own experts may receive
  auto moe_saved = [&](int layer) {
    if (!c.is_moe_layer(layer)) return;
    f.insert(f.end(), {N * E, N, N * K, N * K, N * K, 2 * N * K, E, E});  // probs .. routed
    if (cp > 1) f.push_back(E);                                             // routed_sequence
    f.insert(f.end(), {3, S * C, R * 2 * MF, R * MF, S * C});               // stats xd h act y
    if (ep > 1) f.insert(f.end(), {R * C, R * C});                          // xr yr
  };
  const int first_layer = layout.first_layer();
  if (recompute == Recompute::full) {
    // Each layer keeps only its output (the next layer's input); the rest of one layer's tensors
    // are rebuilt in a shared set during backward.
    for (int l = 0; l < layers; ++l) {
      f.push_back(NS * C);
      moe_saved(first_layer + l);
    }
    if (layers > 0) {
      layer_saved(f);
      f.pop_back();  // the shared set has no residual3
    }
  } else if (recompute == Recompute::selective) {
    // The attention output and its row statistics are recomputed from qkv: one shared set.
    for (int l = 0; l < layers; ++l) {
      f.insert(f.end(), {NS * C, NS, NS, N * d.Q, NS * C, NS * C, NS, NS, N * d.FC, N * d.F, NS * C});
      moe_saved(first_layer + l);
    }
    if (layers > 0) {
      f.push_back(N * d.A);                  // atty
      if (ulysses) f.push_back(N * d.A);     // atty_heads
      f.push_back(d.B * d.NH * d.T);         // lse
    }
  } else {
    for (int l = 0; l < layers; ++l) {
      layer_saved(f);
      moe_saved(first_layer + l);
    }
  }
  if (last) {
    f.insert(f.end(), {NS * C, NS, NS, N * d.V, N});  // lnf, mean, rstd, logits, losses
    if (layout.tp().size > 1) f.insert(f.end(), {N, 2 * N});  // ce_max, ce_stats
  } else {
    f.push_back(N * C);  // output_grad
  }
  if (!first) f.push_back(N * C);  // input_grad
  f.insert(f.end(), {N * C, N * C, N * d.A, N * d.Q, N * d.FC, N * d.F});  // dresidual dln datty dqkv dfch dfch_act
  bool any_moe = false;
  for (int l = 0; l < layers; ++l) any_moe = any_moe || c.is_moe_layer(first_layer + l);
  if (any_moe) {  // moe_out, moe_dy, moe_dxd, moe_dh, moe_dact, moe_dtopk_w, moe_dlogits (moe_dyr, moe_dxr)
    f.insert(f.end(), {N * C, S * C, S * C, R * 2 * MF, R * MF, N * K, N * E});
    if (ep > 1) f.insert(f.end(), {R * C, R * C});
  }
  if (sp && layout.tp().size > 1) {
    f.push_back(N * C);                // full
    if (!first) f.push_back(N * C);    // stage_in
    if (!last) f.push_back(N * C);     // stage_out
  }
  // A split backward keeps its linear output gradients in the layers' finished buffers, all but the
  // last layer's MLP output gradient (Acts::last_d_mproj).
  if (split && layers > 0 && c.has_dense_mlp(first_layer + layers - 1)) f.push_back(N * C);
  if (cp > 1 && layers > 0 && ring) {
    // ring_kv x 2, ring_dkv x 2, ring_dkv_in (N, 2 NKV HS); ring_delta (N, NH); the key/value row table (int64)
    const int64_t kv_heads = d.Q / c.head_size() - d.NH, KV = kv_heads * c.head_size();
    f.insert(f.end(), {N * KV, N * KV, N * KV, N * KV, N * KV, N * d.NH, 2 * N * kv_heads});
  } else if (ulysses && layers > 0) {  // cp_qkv, cp_datty_heads, cp_dqkv_heads, cp_send, cp_recv
    f.insert(f.end(), {N * d.Q, N * d.A, N * d.Q, N * d.Q, N * d.Q});
    // The all-to-all routes' int64 pack and unpack tables, one row per (position, head):
    // qkv to heads and back, then the attention output to heads and back.
    const int64_t qkv_rows = N * (d.Q / c.head_size()), atty_rows = N * d.NH;
    for (int64_t rows : {qkv_rows, qkv_rows, qkv_rows, qkv_rows, atty_rows, atty_rows, atty_rows, atty_rows})
      f.push_back(2 * rows);
  }
  return f;
}

int64_t page_bytes() {
  static const int64_t p = static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  return p > 0 ? p : 4096;
}

}  // namespace tessera::memory_replay
