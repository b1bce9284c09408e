// The decoder-only transformer with explicit forward and backward over the layer range its
// ParamStore owns ([first_layer, last_layer) of the layout). The full model (range [0, L)) maps
// tokens to a loss; a pipeline stage maps hidden states (B,T,C) to hidden states.
// Activations are allocated once for a fixed micro-batch (B, T); forward/backward allocate nothing.
// Tensor parallelism reaches it only through TensorParallelHooks (identity by default): with a
// ParamLayout for shard r of p, it runs that shard's heads, MLP slice and vocabulary slice.
//
// Sequence parallelism (hooks->sequence_parallel() at tp size p > 1; N = B*T divisible by p): rank r
// runs the norms and residual adds on rows [r*N/p, (r+1)*N/p) only and stores only those rows of
// the residual stream, the norm outputs and their statistics (N/p rows instead of N); the
// attention and MLP interiors, logits and loss keep all N rows (their widths are already split).
// Where a whole activation is needed it is all-gathered into one scratch (N, C) buffer shared by
// all layers: the input of each column-parallel linear in forward, and again in backward for its
// weight gradient (Megatron's choice: one extra all-gather per linear instead of keeping N rows per
// layer). Replicated parameters' gradients are then per-rank partial sums (tensor_parallel_hooks.h);
// sum them over tp after backward. Pipeline seams stay whole (B,T,C) and identical on every tp
// rank: a non-first stage takes its rows of stage_input() and all-gathers its input gradient; a
// non-last stage all-gathers its output and takes its rows of stage_output_grad().
//
// Activation recomputation (model/recompute.h; constructor argument or set_recompute): selective
// keeps no attention output or softmax statistics per layer and re-runs the attention kernel in
// backward; full keeps only each layer's output (the next layer's input) and re-runs the layer's
// forward in backward, into one set of layer activations shared by all layers. Losses, gradients,
// the grad-ready order and the pipeline seams are bitwise those of none. The recomputed forward
// calls the same tensor-parallel hooks as the forward (identical on every tp rank, so the
// collectives match; full stops before the MLP's output projection, which backward does not need:
// copy_to_region attn_qkv, reduce_from_region attn_proj, copy_to_region mlp_fc), but no layer
// events: it runs right after before_backward of its layer, whose parameters are then available.
//
// Mixture of experts (cfg.is_moe_layer(l); model/transformer_moe.cpp): the MLP branch of a MoE layer
// is a softmax top-k router over E SwiGLU experts (plus the dense MLP as a shared expert when
// configured): gather the rows each expert received, one matmul pair per expert, weighted scatter
// back. The expert sizes and the router's statistics cross to the host once per MoE layer per forward. backward(loss_scale) adds
// the gradients of the load-balancing and z losses (scaled by loss_scale, on every pipeline stage);
// the loss forward returns stays the language-model cross-entropy (moe_layer_stats() has the rest).
//
// Mixed precision (set_precision; model/precision.h): in bf16 / fp16 every linear layer and its
// backward round their operands and accumulate in f32; fp32 runs exactly the f32 ops.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/memory.h"
#include "model/config.h"
#include "model/context_parallel_hooks.h"
#include "model/expert_parallel_hooks.h"
#include "model/numerics_probe.h"
#include "model/op_profile.h"
#include "model/param_layout.h"
#include "model/precision.h"
#include "model/recompute.h"
#include "model/tensor_parallel_hooks.h"

namespace tessera {

struct MoeActs;  // transformer_state.h

class Transformer {
 public:
  // B, T: micro-batch shape (T <= cfg.max_seq_len). `backend` runs every op; it and `store` must
  // outlive the model. `recompute`: which activations are kept for backward (model/recompute.h).
  Transformer(Backend& backend, const ModelConfig& cfg, ParamStore& store, int64_t B, int64_t T,
              Recompute recompute = Recompute::none);
  ~Transformer();
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  const ModelConfig& config() const { return cfg_; }
  int64_t batch() const { return B_; }
  int64_t seq_len() const { return T_; }
  bool is_first_stage() const { return first_ == 0; }
  bool is_last_stage() const { return store_.layout().holds_head(); }

  // Full model or first stage: tokens (B,T) in [0, V). Last stage with targets (B,T) (entries < 0
  // are ignored): returns the mean loss over valid targets. Without targets: computes logits()
  // and returns 0. Non-first stages take hidden states through stage_input() instead of tokens.
  // The loss crosses to the host here, per call (eval, sample, tests).
  float forward(const int32_t* tokens, const int32_t* targets);
  // The training form: with targets, adds the mean loss to *loss_sum (one double of this backend's
  // memory) instead, so the step's loss stays on the device until the step ends.
  void forward(const int32_t* tokens, const int32_t* targets, double* loss_sum);
  Backend& backend() const { return be_; }
  // Accumulates parameter gradients into the store (+=). The loss gradient is scaled by
  // loss_scale (e.g. 1/accumulation_steps). Requires a preceding forward with targets (last
  // stage) or a filled stage_output_grad() (non-last stage).
  void backward(float loss_scale = 1.f);
  // Split backward (zero-bubble pipelines, parallel/pipeline_schedule.h zb_h1): backward() then
  // computes the input gradients and the norms', embeddings' and MoE layers' parameter gradients,
  // and keeps each layer's linear output gradients; backward_weights() adds the linear layers'
  // weight and bias gradients (bitwise what the whole backward adds) and calls the grad-ready
  // callback, layer by layer. Needs Recompute::none and no sequence parallelism (the weight pass
  // reads each layer's saved linear inputs). Reallocates the activations.
  void set_split_backward(bool split);
  void backward_weights();

  // (B,T,logits_width()) logits of the last forward without targets: all V columns at tp size 1,
  // else this rank's vocabulary shard, columns [lo, lo + V/p) of the padded vocabulary
  // (ParamLayout::local_vocab_range; columns >= the true V are padding).
  const float* logits() const;
  int64_t logits_width() const;
  // Per-position losses (B,T) of the last forward with targets.
  const float* losses() const;
  // Pipeline seams: hidden states entering this stage (B,T,C) (write before forward on a
  // non-first stage), leaving it (read after forward on a non-last stage), the gradient w.r.t.
  // the output (write before backward on a non-last stage), and w.r.t. the input (read after).
  // All whole (B,T,C), also under sequence parallelism (the same on every tp rank); there
  // stage_input() exists only on a non-first stage and stage_output() on a non-last one (else null).
  float* stage_input();
  const float* stage_output() const;
  float* stage_output_grad();
  const float* stage_input_grad() const;

  // Called during backward as soon as the gradients of `layer` are final (layer n_layer = final
  // norm/head, -1 = embeddings), in the order they become ready; data parallelism hooks in here.
  void set_grad_ready_callback(std::function<void(int layer)> cb) { grad_ready_ = std::move(cb); }
  // While muted the grad-ready callback is not called (a replayed step must not communicate gradients).
  void mute_grad_ready(bool muted) { grad_ready_muted_ = muted; }
  // Called after each probed op with its output (numerics_probe.h); nullptr (default): none.
  // A recomputed forward is not probed: the op already ran once in this step's forward.
  void set_numerics_probe(NumericsProbe* probe) { probe_ = probe; }

  // Where a layer's parameters are read (layer -1 = embeddings, n_layer = final norm and head; a
  // tied head reads wte, i.e. layer -1's tensor, at n_layer): before_forward / before_backward come
  // right before the first read, after_forward right after the last read of the forward pass (the
  // backward's last read is followed by the grad-ready callback). ZeRO-3 gathers and frees sharded
  // parameters here.
  enum class LayerEvent { before_forward, after_forward, before_backward };
  void set_layer_callback(std::function<void(LayerEvent, int layer)> cb) { layer_event_ = std::move(cb); }

  // Conjugate tensor-parallel pairs called around the projections, embedding and loss (see
  // tensor_parallel_hooks.h); nullptr restores the identity. `hooks` must outlive the model.
  // Their rank and size must be the layout's TensorParallelShard (TS_CHECKed here and in
  // forward/backward, so a tp layout never runs on the identity by mistake). Reads
  // hooks->sequence_parallel() and, when that changes the activation layout, reallocates the
  // activations (TS_CHECKs validate_sequence_parallel(B*T, tp size): check it with the config).
  void set_tensor_parallel_hooks(TensorParallelHooks* hooks);
  // Whether forward/backward run sequence-parallel (see above).
  bool sequence_parallel() const { return sp_; }
  // The hooks' first communication failure (ok at tp size 1). Check it after forward/backward:
  // after a failure the loss and gradients are meaningless.
  Status tp_status() const { return tp_->status(); }

  // Context parallelism (context_parallel_hooks.h): this model's T is the rank's share of the
  // sequence, positions [cp_rank * T, (cp_rank + 1) * T) (ulysses) or two balanced pieces of T/2
  // (ring); attention runs over the cp group's whole sequence through the hooks' exchanges. nullptr
  // (or size 1) restores the whole-sequence model. Reallocates the activations; TS_CHECKs that
  // cp_size divides the (tp-local) heads and KV heads (ulysses) or that T is even (ring), and that
  // the model has no MoE layer. `hooks` must outlive the model.
  void set_context_parallel_hooks(ContextParallelHooks* hooks);
  int cp_size() const { return cp_size_; }
  // The hooks' first communication failure (ok without context parallelism).
  Status cp_status() const { return cp_ ? cp_->status() : Status(); }

  // Expert parallelism (expert_parallel_hooks.h): this rank computes model.moe_experts / ep_size
  // experts of every MoE layer for the tokens of the whole ep group. nullptr (or size 1) computes
  // every expert here. Reallocates the activations; TS_CHECKs that ep_size divides the experts.
  // `hooks` must outlive the model.
  void set_expert_parallel_hooks(ExpertParallelHooks* hooks);
  Status ep_status() const { return ep_ ? ep_->status() : Status(); }

  // Changes the recomputation mode; reallocates the activations when it changes (so call it at
  // set-up, not between a forward and its backward: the forward's activations are dropped).
  void set_recompute(Recompute recompute);
  Recompute recompute() const { return recompute_; }
  // The arithmetic of the linear layers (model/precision.h): fp32 (default, the f32 ops
  // themselves), or bf16 / fp16 operands with f32 accumulation. Parameters, gradients and every
  // other op stay f32. Takes effect from the next forward; allocates nothing.
  void set_precision(Precision precision) { precision_ = precision; }
  Precision precision() const { return precision_; }
  // Bytes of this model's activation buffers (saved activations, shared recomputation and backward
  // scratch, logits); all of them are counted under MemCategory::activations.
  size_t activation_bytes() const;

  // The routing of each owned MoE layer in the last forward, in layer order (empty for a dense
  // model): tokens kept per expert, dropped assignments, the router's losses without coefficients
  // and its mean entropy. Reads the device (a named crossing: metrics and tests, not the step).
  struct MoeLayerStats {
    int layer = 0;
    std::vector<int32_t> tokens;  // (E) kept assignments per expert
    int64_t routed = 0;           // N * K assignments
    int64_t dropped = 0;          // assignments beyond an expert's capacity
    float load_balance = 0, z = 0, entropy = 0;
  };
  std::vector<MoeLayerStats> moe_layer_stats() const;
  // What the owned MoE layers routed, summed over the forwards since the last call (then reset), in
  // layer order: the metrics' expert load (train/moe_metrics.h). Costs nothing extra: the forward
  // brings the counts and router statistics to the host anyway.
  struct MoeLayerLoad {
    int layer = 0;
    std::vector<int64_t> tokens, routed;  // (E) kept / routed assignments per expert
    int64_t dropped = 0;
    double entropy_sum = 0;  // sum over forwards of the mean router entropy
    int64_t forwards = 0;
  };
  std::vector<MoeLayerLoad> take_moe_load();
  // sum over owned MoE layers of moe_aux_loss * load_balance + moe_z_loss * z: what the MoE layers add
  // to the training objective of the last forward (0 for a dense model).
  double moe_objective() const;

  // Per-kernel-group timing (benchmarks): enable, run steps, read seconds.
  OpProfile& profile() { return profile_; }

 private:
  struct Acts;
  struct LayerView;  // pointers to one layer's activations: its own buffers or the shared ones
  struct Weights;  // resolved pointers into the store: no name look-ups in the step
  // Sizes of one micro-batch: N = B*T rows, Q = qkv width, A = attention width NH*HS, FC = fc
  // output width (F, or 2F for SwiGLU), V = logits columns. Local to this tp rank: NH, NKV, F are
  // divided by the tp size, V is the padded vocabulary divided by it. NS rows starting at row R0
  // are this rank's sequence shard (N/p at R0 = r*N/p under sequence parallelism, else N at 0).
  struct Dims {
    int64_t B, T, N, C, Q, A, F, FC, NH, NKV, HS, V, NS, R0;
    bool llama;
  };
  Dims dims() const;
  void check_tp_hooks() const;
  void allocate_activations();  // for the current sp_ and recompute_
  void place_kept_output_grads();  // a split backward's Acts::deferred (transformer_split_backward.cpp)
  LayerView layer_view(int layer);
  const float* layer_input(int layer);  // (NS, C) the residual stream entering `layer`
  // One block's forward from its input x (NS, C) into v. Without mlp_output it stops after the
  // MLP activation (full recomputation: backward needs nothing after it).
  void layer_forward(int layer, const float* x, const LayerView& v, bool mlp_output);
  // Mixture of experts (transformer_moe.cpp). Slots per MoE layer: N*K, or E*capacity when smaller.
  int64_t moe_slots() const;
  int64_t moe_expert_rows() const { return ep_size_ * moe_slots(); }  // rows the own experts may receive
  void allocate_moe_layer(MoeActs& m);
  // The forward's expert blocks (m.blocks) and, under expert parallelism, the count exchange and
  // the rows to and from each rank; returns the rows the experts here compute.
  int64_t moe_dispatch(MoeActs& m);
  // out (N, C) = the experts' combined output for x (N, C), the layer's ln2 output.
  void moe_forward(int layer, const float* x, float* out);
  // dx (N, C) += the gradient w.r.t. x from dout (N, C), the gradient of the layer output;
  // accumulates the router's and experts' parameter gradients, and the auxiliary losses' (x scale).
  void moe_backward(int layer, const float* x, const float* dout, float* dx, float scale);
  void record_moe_load(int layer, const MoeActs& m);  // adds the forward's routing to moe_load_
  // Context parallelism (transformer_context_parallel.cpp). One all-to-all re-arrangement of a
  // (rows, heads x HS) activation between the sequence split and the head split.
  struct CpRoute;
  void build_cp_routes();  // the four routes, into acts_ (after the buffers are allocated)
  void cp_exchange(const float* in, float* out, const CpRoute& route);
  // qkv_local (N, Q) after the qkv linear -> v.qkv (head split, RoPE applied), v.atty_heads, v.lse,
  // and atty (N, A) at this rank's positions.
  void cp_attention_forward(const LayerView& v, const float* qkv_local, float* atty);
  // datty (N, A) -> dqkv (N, Q), both at this rank's positions.
  void cp_attention_backward(const LayerView& v, const float* datty, float* dqkv);
  // Ring attention (transformer_ring_attention.cpp): v.qkv (RoPE applied) -> v.atty, v.lse over the
  // cp group's whole sequence; and datty -> dqkv (+=), keys and values round the ring.
  void build_ring_rows();  // the key/value rows of qkv, into acts_
  void ring_attention_forward(const LayerView& v);
  void ring_attention_backward(const LayerView& v, const float* datty, float* dqkv);
  // Calls f(row0, T_piece, pos0) for each piece of this rank's positions: rows [row0, row0 + B*T_piece)
  // of the (N, ...) activations hold positions [pos0, pos0 + T_piece) of the B sequences. One piece,
  // or two under ring attention (data/loader.h SequenceChunk).
  template <typename F>
  void for_each_position_piece(F f) const {
    if (!cp_ring_) {
      f(int64_t{0}, T_, static_cast<int64_t>(cp_rank_) * T_);
      return;
    }
    const int64_t h = T_ / 2;
    f(int64_t{0}, h, cp_rank_ * h);
    f(B_ * h, h, (2 * cp_size_ - 1 - cp_rank_) * h);
  }
  Backend& be_;
  ModelConfig cfg_;
  ParamStore& store_;
  int64_t B_, T_;
  int first_, last_;
  int tp_rank_ = 0, tp_size_ = 1;
  ContextParallelHooks* cp_ = nullptr;  // null: the whole sequence
  int cp_rank_ = 0, cp_size_ = 1;
  bool cp_ring_ = false;  // ring attention; else (with cp_) Ulysses
  ExpertParallelHooks* ep_ = nullptr;  // null: every expert computed here
  int ep_size_ = 1;
  bool sp_ = false;  // sequence parallel (only at tp size > 1)
  bool split_backward_ = false;
  Recompute recompute_ = Recompute::none;
  Precision precision_ = Precision::fp32;
  int64_t vocab_lo_ = 0, vocab_valid_ = 0;  // first vocabulary row of the shard; its non-padding rows
  std::unique_ptr<Acts> acts_;
  std::unique_ptr<Weights> w_;
  OpProfile profile_;
  std::function<void(int)> grad_ready_;
  bool grad_ready_muted_ = false;
  void grad_ready(int layer) {
    if (grad_ready_ && !grad_ready_muted_) grad_ready_(layer);
  }
  NumericsProbe* probe_ = nullptr;
  bool recomputing_ = false;
  void probe(ModelPass pass, int layer, int index, std::string_view op, float* out, int64_t n) {
    if (probe_ && !recomputing_) probe_->after_op({pass, layer, index, op}, out, n);
  }
  std::function<void(LayerEvent, int)> layer_event_;
  void event(LayerEvent e, int layer) {
    if (layer_event_) layer_event_(e, layer);
  }
  IdentityTensorParallelHooks identity_tp_;
  TensorParallelHooks* tp_ = &identity_tp_;
  const int32_t* last_tokens_ = nullptr;  // the backend's copy (the caller's array on the CPU)
  const int32_t* batch_on_device(Buffer& copy, const int32_t* host, int64_t n);
  std::vector<MoeLayerLoad> moe_load_;  // one per owned MoE layer, in layer order
};

}  // namespace tessera
