// Transformer set-up: resolving the tensors of the layer range, allocating the activations (under
// recomputation and sequence parallelism), the tensor-parallel hooks and the stage seams. The passes
// themselves are in transformer_passes.cpp.
#include "model/transformer.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/log.h"
#include "model/transformer_state.h"

namespace tessera {

Transformer::Transformer(Backend& backend, const ModelConfig& cfg, ParamStore& store, int64_t B, int64_t T,
                         Recompute recompute)
    : be_(backend), cfg_(cfg), store_(store), B_(B), T_(T),
      first_(store.layout().first_layer()), last_(store.layout().last_layer()), recompute_(recompute),
      acts_(std::make_unique<Acts>()), w_(std::make_unique<Weights>()) {
  TS_CHECK(T <= cfg.max_seq_len) << "T=" << T << " exceeds max_seq_len=" << cfg.max_seq_len;
  const ParamLayout& layout = store.layout();
  tp_rank_ = layout.tp().rank;
  tp_size_ = layout.tp().size;
  vocab_lo_ = layout.local_vocab_range().first;
  const Dims d = dims();
  vocab_valid_ = std::clamp<int64_t>(cfg.vocab_size - vocab_lo_, 0, d.V);

  // Resolve every tensor once.
  auto both = [&](const std::string& name, float*& param, float*& grad) {
    if (const ParamInfo* info = layout.find(name)) {
      param = store.params() + info->offset;
      grad = store.grads() + info->offset;
    }
  };
  Weights& w = *w_;
  both("wte", w.wte, w.dwte);
  both("wpe", w.wpe, w.dwpe);
  both("lnf.w", w.lnf_w, w.dlnf_w);
  both("lnf.b", w.lnf_b, w.dlnf_b);
  if (is_last_stage()) {
    if (cfg.tied_embeddings) {
      TS_CHECK(w.wte) << "a tied head needs the embedding on the last stage";
      w.head = w.wte;
      w.dhead = w.dwte;
    } else {
      both("lm_head.w", w.head, w.dhead);
    }
  }
  for (int l = first_; l < last_; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    TensorPtrs tp, tg;
    both(p + "ln1.w", tp.ln1_w, tg.ln1_w);
    both(p + "ln1.b", tp.ln1_b, tg.ln1_b);
    both(p + "attn.qkv.w", tp.qkv_w, tg.qkv_w);
    both(p + "attn.qkv.b", tp.qkv_b, tg.qkv_b);
    both(p + "attn.proj.w", tp.proj_w, tg.proj_w);
    both(p + "attn.proj.b", tp.proj_b, tg.proj_b);
    both(p + "ln2.w", tp.ln2_w, tg.ln2_w);
    both(p + "ln2.b", tp.ln2_b, tg.ln2_b);
    both(p + "mlp.fc.w", tp.fc_w, tg.fc_w);
    both(p + "mlp.fc.b", tp.fc_b, tg.fc_b);
    both(p + "mlp.proj.w", tp.mproj_w, tg.mproj_w);
    both(p + "mlp.proj.b", tp.mproj_b, tg.mproj_b);
    both(p + "moe.gate.w", tp.gate_w, tg.gate_w);
    both(p + "moe.fc.w", tp.moe_fc_w, tg.moe_fc_w);
    both(p + "moe.proj.w", tp.moe_proj_w, tg.moe_proj_w);
    TS_CHECK(!cfg.is_moe_layer(l) || (tp.gate_w && tp.moe_fc_w && tp.moe_proj_w))
        << "layer " << l << " is a mixture-of-experts layer but the parameter layout has no moe.* tensors for it";
    TS_CHECK(!cfg.has_dense_mlp(l) || tp.fc_w) << "layer " << l << " needs mlp.* tensors the layout lacks";
    w.p.push_back(tp);
    w.g.push_back(tg);
  }

  allocate_activations();
}

Transformer::~Transformer() = default;

void Transformer::allocate_activations() {
  const Dims d = dims();
  const int64_t B = d.B, T = d.T, N = d.N, C = d.C, Q = d.Q, F = d.F, FC = d.FC, A = d.A, NS = d.NS;
  acts_.reset();  // free the old set first: the peak is one set, not two
  acts_ = std::make_unique<Acts>();
  Acts& a = *acts_;
  auto act_buffer = [this, &a](int64_t numel) {
    Buffer b = be_.allocate(static_cast<size_t>(numel) * sizeof(float), MemCategory::activations);
    a.bytes += b.bytes();
    return b;
  };
  a.encoded = act_buffer(NS * C);
  // attention: atty and lse; rest: everything else but the layer output residual3.
  auto layer_buffers = [&](LayerActs& la, bool attention, bool rest, bool output) {
    if (rest) {
      la.ln1 = act_buffer(NS * C); la.ln1_mean = act_buffer(NS); la.ln1_rstd = act_buffer(NS);
      la.qkv = act_buffer(N * Q);
    }
    if (attention) {
      la.atty = act_buffer(N * A);
      if (cp_size_ > 1 && !cp_ring_) la.atty_heads = act_buffer(N * A);
      la.lse = act_buffer(B * d.NH * T);
    }
    if (rest) {
      la.residual2 = act_buffer(NS * C);
      la.ln2 = act_buffer(NS * C); la.ln2_mean = act_buffer(NS); la.ln2_rstd = act_buffer(NS);
      la.fch = act_buffer(N * FC);
      la.fch_act = act_buffer(N * F);
    }
    if (output) la.residual3 = act_buffer(NS * C);
  };
  const bool keep_attention = recompute_ == Recompute::none, keep_rest = recompute_ != Recompute::full;
  for (int l = first_; l < last_; ++l) {
    LayerActs la;
    layer_buffers(la, keep_attention, keep_rest, /*output=*/true);
    if (cfg_.is_moe_layer(l)) allocate_moe_layer(la.moe);
    a.layers.push_back(std::move(la));
  }
  if (first_ < last_) layer_buffers(a.shared, !keep_attention, !keep_rest, /*output=*/false);
  if (is_last_stage()) {
    a.lnf = act_buffer(NS * C); a.lnf_mean = act_buffer(NS); a.lnf_rstd = act_buffer(NS);
    a.logits = act_buffer(N * d.V);
    a.losses = act_buffer(N);
    if (tp_size_ > 1) {
      a.ce_max = act_buffer(N);
      a.ce_stats = act_buffer(2 * N);
    }
  } else {
    a.output_grad = act_buffer(N * C);
  }
  if (!is_first_stage()) a.input_grad = act_buffer(N * C);
  a.dresidual = act_buffer(N * C);
  a.dln = act_buffer(N * C);
  a.datty = act_buffer(N * A);
  a.dqkv = act_buffer(N * Q);
  a.dfch = act_buffer(N * FC);
  a.dfch_act = act_buffer(N * F);
  bool any_moe = false;
  for (int l = first_; l < last_; ++l) any_moe = any_moe || cfg_.is_moe_layer(l);
  if (any_moe) {
    const int64_t S = moe_slots(), E = cfg_.moe_experts, K = cfg_.moe_top_k;
    a.moe_out = act_buffer(N * C);
    const int64_t R = moe_expert_rows();
    a.moe_dy = act_buffer(S * C); a.moe_dxd = act_buffer(S * C);
    const int64_t MF = cfg_.d_ff;  // experts are never split by tp
    a.moe_dh = act_buffer(R * 2 * MF); a.moe_dact = act_buffer(R * MF);
    a.moe_dtopk_w = act_buffer(N * K); a.moe_dlogits = act_buffer(N * E);
    if (ep_) {
      a.moe_dyr = act_buffer(R * C);
      a.moe_dxr = act_buffer(R * C);
    }
  }
  if (sp_) {
    a.full = act_buffer(N * C);
    if (!is_first_stage()) a.stage_in = act_buffer(N * C);
    if (!is_last_stage()) a.stage_out = act_buffer(N * C);
  }
  if (split_backward_ && first_ < last_) {
    if (cfg_.has_dense_mlp(last_ - 1)) a.last_d_mproj = act_buffer(N * C);
    place_kept_output_grads();
  }
  if (cp_size_ > 1 && first_ < last_ && cp_ring_) {
    const int64_t KV = 2 * d.NKV * d.HS;
    for (Buffer& b : a.ring_kv) b = act_buffer(N * KV);
    for (Buffer& b : a.ring_dkv) b = act_buffer(N * KV);
    a.ring_dkv_in = act_buffer(N * KV);
    a.ring_delta = act_buffer(N * d.NH);
    build_ring_rows();
  } else if (cp_size_ > 1 && first_ < last_) {
    a.cp_qkv = act_buffer(N * Q);
    a.cp_datty_heads = act_buffer(N * A);
    a.cp_dqkv_heads = act_buffer(N * Q);
    a.cp_send = act_buffer(N * Q);
    a.cp_recv = act_buffer(N * Q);
    build_cp_routes();
  }
}

void Transformer::set_recompute(Recompute recompute) {
  if (recompute == recompute_) return;
  TS_CHECK(!split_backward_) << "a split backward needs train.recompute = \"none\"";
  recompute_ = recompute;
  allocate_activations();
}

size_t Transformer::activation_bytes() const { return acts_->bytes; }

Transformer::LayerView Transformer::layer_view(int layer) {
  LayerActs& own = acts_->layers[layer - first_];
  LayerActs& shared = acts_->shared;
  auto pick = [](Buffer& mine, Buffer& common) { return (mine.bytes() ? mine : common).as<float>(); };
  return {pick(own.ln1, shared.ln1),     pick(own.ln1_mean, shared.ln1_mean), pick(own.ln1_rstd, shared.ln1_rstd),
          pick(own.qkv, shared.qkv),     pick(own.atty, shared.atty),         pick(own.lse, shared.lse),
          pick(own.residual2, shared.residual2), pick(own.ln2, shared.ln2),   pick(own.ln2_mean, shared.ln2_mean),
          pick(own.ln2_rstd, shared.ln2_rstd),   pick(own.fch, shared.fch),   pick(own.fch_act, shared.fch_act),
          own.residual3.as<float>(), pick(own.atty_heads, shared.atty_heads)};
}

const float* Transformer::layer_input(int layer) {
  return layer == first_ ? acts_->encoded.as<float>() : acts_->layers[layer - first_ - 1].residual3.as<float>();
}

void Transformer::set_tensor_parallel_hooks(TensorParallelHooks* hooks) {
  TensorParallelHooks* h = hooks ? hooks : &identity_tp_;
  TS_CHECK(h->tp_size() == tp_size_ && h->tp_rank() == tp_rank_)
      << "Transformer: tensor-parallel hooks of rank " << h->tp_rank() << " of " << h->tp_size()
      << " do not match the parameter layout's shard (rank " << tp_rank_ << " of " << tp_size_
      << "); build the ParamLayout with the tp group's TensorParallelShard{rank, size}";
  const bool sp = h->sequence_parallel() && tp_size_ > 1;  // at tp size 1 it would change nothing
  if (sp) {
    const Status s = validate_sequence_parallel(B_ * T_, tp_size_);
    TS_CHECK(s.ok()) << "Transformer (micro_batch B = " << B_ << ", seq_len T = " << T_ << "): " << s.message();
  }
  TS_CHECK(!(sp && split_backward_)) << "a split backward does not run sequence-parallel (its weight pass reads "
                                         "each layer's whole linear inputs)";
  tp_ = h;
  if (sp != sp_) {
    sp_ = sp;
    allocate_activations();
  }
}

void Transformer::check_tp_hooks() const {
  TS_CHECK(tp_->tp_size() == tp_size_ && tp_->tp_rank() == tp_rank_)
      << "Transformer: the parameter layout is tensor-parallel shard " << tp_rank_ << " of " << tp_size_
      << " but the hooks are rank " << tp_->tp_rank() << " of " << tp_->tp_size()
      << "; call set_tensor_parallel_hooks with the tp group's hooks (parallel/tensor_parallel.h)";
  TS_CHECK((tp_->sequence_parallel() && tp_size_ > 1) == sp_)
      << "Transformer: the hooks' sequence_parallel() changed after set_tensor_parallel_hooks; set them again";
}

float* Transformer::stage_input() { return (sp_ ? acts_->stage_in : acts_->encoded).as<float>(); }
const float* Transformer::stage_output() const {
  if (sp_) return acts_->stage_out.as<float>();
  return acts_->layers.empty() ? acts_->encoded.as<float>() : acts_->layers.back().residual3.as<float>();
}
float* Transformer::stage_output_grad() { return acts_->output_grad.as<float>(); }
const float* Transformer::stage_input_grad() const { return acts_->input_grad.as<float>(); }
const float* Transformer::logits() const { return acts_->logits.as<float>(); }
const float* Transformer::losses() const { return acts_->losses.as<float>(); }
int64_t Transformer::logits_width() const { return dims().V; }

}  // namespace tessera
