// The Transformer's private state, shared by transformer.cpp (set-up, allocation) and
// transformer_passes.cpp (forward, backward): saved activations, the shared recomputation set,
// backward scratch and the resolved tensor pointers. Internal to model/.
#pragma once
#include <array>
#include <vector>

#include "core/memory.h"
#include "model/transformer.h"

namespace tessera {

// Saved activations of one layer (N = B*T rows). Under tensor parallelism NH, NKV, Q, A, F, FC and
// V are this rank's local sizes (NH/p, ..., padded V/p); C and N are whole. NS: rows of this rank's
// sequence shard (N/p under sequence parallelism, else N). With recomputation a layer leaves empty
// what it does not keep (selective: atty, lse; full: all but residual3), and Acts::shared holds
// exactly those, once for all layers.
// Saved activations of one mixture-of-experts layer (N tokens, E experts, top-K, S slots: N*K when
// dropless, else min(N*K, E*capacity)); model/transformer_moe.cpp. Kept under every recomputation
// mode: backward reads them as the forward left them.
struct MoeActs {
  Buffer probs;                    // (N, E) router logits, then their softmax (in place)
  Buffer lse;                      // (N) log-sum-exp of the logits (z-loss)
  Buffer topk_idx, topk_w;         // (N, K) int32 experts and renormalised weights
  Buffer slot_of;                  // (N, K) int32 slot of each assignment, -1 when dropped
  Buffer slot_token;               // (N*K) int64 token row of each slot, grouped by expert
  Buffer counts, routed;           // (E) int32 kept / routed assignments per expert
  Buffer routed_sequence;          // (E) int32 context-parallel only: routed summed over the cp group
  Buffer stats;                    // (3) load-balancing loss, z-loss, router entropy (no coefficients)
  Buffer xd;                       // (S, C) the dispatched input rows
  Buffer h;                        // (S, 2F) experts' fc output [gate | up]
  Buffer act;                      // (S, F) after SwiGLU
  Buffer y;                        // (S, C) experts' outputs
  std::vector<int32_t> host_counts;  // counts on the host: the sizes of the expert matmuls
  std::vector<int32_t> host_routed;  // context-parallel only: routed on the host, for the cp sum
  // Expert parallelism (expert_parallel_hooks.h; R = ep x S rows at most): the rows this rank's
  // experts received from every ep rank and their outputs; h and act then hold R rows too.
  Buffer xr, yr;                     // (R, C)
  std::vector<int32_t> recv_counts;  // (ep, E/ep) rows of each own expert from each rank
  std::vector<int64_t> send_rows, recv_rows;  // (ep) rows to / from each rank
  // The expert matmuls of the last forward: expert e over rows [first, first + rows) of the expert
  // buffers (xd, h, act, y; under ep xr, h, act, yr). Empty experts have no block.
  struct Block {
    int64_t expert, first, rows;
    int source;  // the ep rank whose tokens these are (0 without ep)
  };
  std::vector<Block> blocks;
  // Under ep, this rank's rows for its own experts: from row own_send_first of xd (and the output
  // gradients' rows), the same rows as from row own_recv_first of xr.
  int64_t own_send_first = 0, own_recv_first = 0;
};

struct LayerActs {
  Buffer ln1, ln1_mean, ln1_rstd;  // (NS,C) (NS) (NS)
  Buffer qkv;                      // (N, Q) Q = (NH+2NKV)*HS, after RoPE; context-parallel: the
                                   // head split (B, cp*T, Q/cp)
  Buffer atty;                     // (N, A) A = NH*HS, attention output before projection
  Buffer atty_heads;               // context-parallel only: atty's head split (B, cp*T, A/cp)
  Buffer lse;                      // (B, NH, T); context-parallel: (B, NH/cp, cp*T)
  Buffer residual2;                // (NS, C) x + attention branch
  Buffer ln2, ln2_mean, ln2_rstd;  // (NS,C) (NS) (NS)
  Buffer fch;                      // (N, FC) fc output (FC = F for gpt2, 2F [gate|up] for llama)
  Buffer fch_act;                  // (N, F) after GELU / SwiGLU
  Buffer residual3;                // (NS, C) layer output
  MoeActs moe;                     // MoE layers only (else empty)
};

// A re-arrangement between the sequence split (N, H heads of HS) and the head split (B, cp*T,
// H/cp heads) as gather (pack into cp blocks), all-to-all, gather (unpack): `pack` and `unpack`
// hold, per HS-wide row of the result, the row of the source it comes from.
struct Transformer::CpRoute {
  Buffer pack, unpack;  // int64 (rows)
  int64_t rows = 0;     // HS-wide rows: N * H
};

struct Transformer::Acts {
  size_t bytes = 0;                // of all the buffers below
  Buffer encoded;                  // (NS, C) embedding output, or the stage input (its rows)
  std::vector<LayerActs> layers;
  LayerActs shared;                // recomputation: what the layers do not keep (else empty)
  Buffer lnf, lnf_mean, lnf_rstd;  // (NS, C) (NS) (NS)
  Buffer logits;                   // (N, V); holds dlogits after a forward with targets
  Buffer losses;                   // (N)
  Buffer loss_scratch;             // one double: forward()'s loss before it crosses to the host
  // A device backend's copies of the batch's tokens and targets (N int32 each; unused on the CPU,
  // whose ops read the caller's host arrays).
  Buffer tokens_on_device, targets_on_device;
  Buffer ce_max, ce_stats;         // (N) (N, 2) row statistics of the vocabulary-parallel loss (tp > 1)
  // Backward scratch, shared by all layers.
  Buffer dresidual;                // (N, C) gradient of the residual stream
  Buffer dln;                      // (N, C)
  Buffer datty;                    // (N, A)
  Buffer dqkv;                     // (N, Q)
  Buffer dfch;                     // (N, FC)
  Buffer dfch_act;                 // (N, F)
  // Mixture of experts (only when the range has a MoE layer), shared by all layers:
  Buffer moe_out;                  // (N, C) combined expert output before the residual add
  Buffer moe_dy, moe_dxd;          // (S, C) gradients of the experts' outputs / dispatched inputs
  Buffer moe_dh;                   // (S, 2F)
  Buffer moe_dact;                 // (S, F)
  Buffer moe_dtopk_w;              // (N, K)
  Buffer moe_dlogits;              // (N, E)
  Buffer moe_dyr, moe_dxr;         // (R, C) expert parallelism: moe_dy / moe_dxd at the experts' owner
  // Split backward only (set_split_backward): where each owned layer keeps its linear output
  // gradients from backward() to backward_weights() (d_mproj / d_fc only with a dense MLP). Each
  // goes into a buffer of the layer that the backward has finished reading by then: d_qkv into qkv,
  // d_fc into fch, d_proj into residual2, d_mproj into the layer's output residual3 (read last by the
  // next layer's backward) -- except the last owned layer's, which may be a pipeline send still in
  // flight and so gets last_d_mproj. The split then costs one (N, C) buffer per model.
  struct LinearOutputGrads {
    float *d_mproj = nullptr, *d_fc = nullptr, *d_proj = nullptr, *d_qkv = nullptr;  // (N, C) (N, FC) (N, C) (N, Q)
  };
  std::vector<LinearOutputGrads> deferred;
  Buffer last_d_mproj;             // (N, C)
  Buffer output_grad;              // (N, C) gradient w.r.t. the stage output (non-last stage)
  Buffer input_grad;               // (N, C) gradient w.r.t. the stage input (non-first stage)
  // Sequence parallelism only (else empty):
  Buffer full;                     // (N, C) a gathered column-parallel input, or a row-parallel
                                   // output (embedding output) before its reduce-scatter
  Buffer stage_in, stage_out;      // (N, C) whole stage input (non-first) / output (non-last)
  // Context parallelism only (else empty):
  Buffer cp_qkv;                   // (N, Q) the qkv linear's output at this rank's positions
  Buffer cp_datty_heads;           // (N, A) datty's head split
  Buffer cp_dqkv_heads;            // (N, Q) the head split of dqkv
  Buffer cp_send, cp_recv;         // (N, Q) all-to-all blocks
  CpRoute qkv_to_heads, qkv_to_seq, atty_to_heads, atty_to_seq;
  // Ring attention only (else empty); KV = 2 x NKV x HS floats per position:
  std::array<Buffer, 2> ring_kv;   // (N, KV) the keys and values in hand / arriving
  std::array<Buffer, 2> ring_dkv;  // (N, KV) this step's key/value gradients / the last step's, in flight
  Buffer ring_dkv_in;              // (N, KV) the travelling key/value gradients from the previous rank
  Buffer ring_delta;               // (2, B, NH, T/2) rowsum(datty * atty) per piece
  Buffer ring_kv_rows;             // int64 (N x 2 NKV): the HS-wide rows of qkv that are keys and values
  bool have_dlogits = false;
};

// One layer's activations: its own buffers, or the shared ones where it keeps none.
struct Transformer::LayerView {
  float *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *lse, *r2, *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_act, *r3;
  float* atty_heads;  // null without context parallelism
};


// Pointers to one set of tensors (parameters or their gradients); null where absent (no biases).
struct TensorPtrs {
  float *ln1_w = nullptr, *ln1_b = nullptr, *qkv_w = nullptr, *qkv_b = nullptr, *proj_w = nullptr,
        *proj_b = nullptr, *ln2_w = nullptr, *ln2_b = nullptr, *fc_w = nullptr, *fc_b = nullptr,
        *mproj_w = nullptr, *mproj_b = nullptr;
  float *gate_w = nullptr, *moe_fc_w = nullptr, *moe_proj_w = nullptr;  // MoE layers: router, stacked experts
};

struct Transformer::Weights {
  std::vector<TensorPtrs> p, g;  // per owned layer
  float *wte = nullptr, *wpe = nullptr, *lnf_w = nullptr, *lnf_b = nullptr, *head = nullptr;
  float *dwte = nullptr, *dwpe = nullptr, *dlnf_w = nullptr, *dlnf_b = nullptr, *dhead = nullptr;
};

}  // namespace tessera
