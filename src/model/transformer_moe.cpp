// The mixture-of-experts MLP branch of the Transformer: a softmax top-k router in f32, dispatch by
// gathering each expert's rows into one contiguous block, one SwiGLU matmul pair per expert over the
// rows it received, and a weighted scatter back (Mixtral's layer, computed as grouped matmuls).
// Under tensor parallelism every tp rank runs the MoE layer whole on the same N rows (its tensors
// are replicated; sequence parallelism is refused with MoE), so every buffer here has all N rows
// and the input gradient is the same on every tp rank. Under context parallelism (dropless only)
// the rank's N positions, and the only hook called sums the routed counts over the cp group for the
// load-balancing loss. Under expert parallelism the dispatched rows travel to their experts' owner
// and back around the expert matmuls (expert_parallel_hooks.h); routing, combine and the router's
// losses stay local.
#include <algorithm>
#include <numeric>

#include "core/log.h"
#include "model/linear_precision.h"
#include "model/transformer.h"
#include "model/transformer_state.h"

namespace tessera {

int64_t Transformer::moe_slots() const {
  const int64_t N = B_ * T_, K = cfg_.moe_top_k, cap = cfg_.moe_capacity(N);
  return cap > 0 ? std::min(N * K, cfg_.moe_experts * cap) : N * K;
}

void Transformer::allocate_moe_layer(MoeActs& m) {
  const int64_t N = B_ * T_, C = cfg_.d_model, F = cfg_.d_ff, E = cfg_.moe_experts, K = cfg_.moe_top_k;
  const int64_t S = moe_slots();
  Acts& a = *acts_;
  auto buffer = [&](int64_t bytes) {
    Buffer b = be_.allocate(static_cast<size_t>(bytes), MemCategory::activations);
    a.bytes += b.bytes();
    return b;
  };
  const int64_t f = sizeof(float), i32 = sizeof(int32_t);
  m.probs = buffer(N * E * f);
  m.lse = buffer(N * f);
  m.topk_idx = buffer(N * K * i32);
  m.topk_w = buffer(N * K * f);
  m.slot_of = buffer(N * K * i32);
  m.slot_token = buffer(N * K * static_cast<int64_t>(sizeof(int64_t)));
  m.counts = buffer(E * i32);
  m.routed = buffer(E * i32);
  if (cp_size_ > 1) {
    m.routed_sequence = buffer(E * i32);
    m.host_routed.assign(static_cast<size_t>(E), 0);
  }
  m.stats = buffer(3 * f);
  const int64_t R = moe_expert_rows();  // = S without expert parallelism
  m.xd = buffer(S * C * f);
  m.h = buffer(R * 2 * F * f);
  m.act = buffer(R * F * f);
  m.y = buffer(S * C * f);
  if (ep_) {
    m.xr = buffer(R * C * f);
    m.yr = buffer(R * C * f);
  }
  m.host_counts.assign(static_cast<size_t>(E), 0);
}

void Transformer::set_expert_parallel_hooks(ExpertParallelHooks* hooks) {
  const int size = hooks ? hooks->ep_size() : 1;
  TS_CHECK(size == 1 || (cfg_.is_moe() && cfg_.moe_experts % size == 0))
      << "expert parallelism over " << size << " ranks needs a mixture-of-experts model whose experts ("
      << cfg_.moe_experts << ") it divides";
  const ExpertShard stored = store_.layout().experts();
  TS_CHECK(stored.size == 1 || (stored.size == size && stored.rank == hooks->ep_rank()))
      << "the parameters store experts shard " << stored.rank << " of " << stored.size
      << " but the expert-parallel hooks are rank " << (hooks ? hooks->ep_rank() : 0) << " of " << size;
  ep_ = size > 1 ? hooks : nullptr;
  ep_size_ = size;
  allocate_activations();
}

namespace {
// The expert matmuls over rows grouped by expert: `counts` holds `sources` blocks of `experts`
// counts (rows per expert from each source rank, in that order), the experts numbered from
// `first_expert`. One block per (source, expert) with rows.
std::vector<MoeActs::Block> expert_blocks(const std::vector<int32_t>& counts, int64_t experts, int64_t first_expert) {
  std::vector<MoeActs::Block> blocks;
  int64_t first = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > 0)
      blocks.push_back({first_expert + static_cast<int64_t>(i) % experts, first, static_cast<int64_t>(counts[i]),
                        static_cast<int>(static_cast<int64_t>(i) / experts)});
    first += counts[i];
  }
  return blocks;
}
// Sums of `per` consecutive counts: the rows to or from each ep rank.
std::vector<int64_t> rows_per_rank(const std::vector<int32_t>& counts, int64_t per) {
  std::vector<int64_t> rows(counts.size() / static_cast<size_t>(per), 0);
  for (size_t i = 0; i < counts.size(); ++i) rows[i / static_cast<size_t>(per)] += counts[i];
  return rows;
}
}  // namespace

int64_t Transformer::moe_dispatch(MoeActs& m) {
  const int64_t E = cfg_.moe_experts;
  if (!ep_) {
    TS_CHECK(!store_.layout().experts_sharded()) << "a layout storing only some experts needs expert-parallel hooks";
    m.blocks = expert_blocks(m.host_counts, E, 0);
    return std::accumulate(m.host_counts.begin(), m.host_counts.end(), int64_t{0});
  }
  // Rank d owns experts [d*EL, (d+1)*EL): host_counts is already one block of EL counts per rank.
  const int64_t EL = E / ep_size_;
  m.recv_counts.assign(static_cast<size_t>(E), 0);
  ep_->exchange_counts(m.host_counts.data(), m.recv_counts.data(), EL);
  m.send_rows = rows_per_rank(m.host_counts, EL);
  m.recv_rows = rows_per_rank(m.recv_counts, EL);
  const int me = ep_->ep_rank();
  m.blocks = expert_blocks(m.recv_counts, EL, me * EL);
  m.own_send_first = std::accumulate(m.send_rows.begin(), m.send_rows.begin() + me, int64_t{0});
  m.own_recv_first = std::accumulate(m.recv_rows.begin(), m.recv_rows.begin() + me, int64_t{0});
  return std::accumulate(m.recv_rows.begin(), m.recv_rows.end(), int64_t{0});
}

void Transformer::moe_forward(int l, const float* x, float* out) {
  const int64_t N = B_ * T_, C = cfg_.d_model, F = cfg_.d_ff, E = cfg_.moe_experts, K = cfg_.moe_top_k;
  MoeActs& m = acts_->layers[l - first_].moe;
  const TensorPtrs& p = w_->p[l - first_];
  OpProfile& prof = profile_;
  float* probs = m.probs.as<float>();
  auto* idx = m.topk_idx.as<int32_t>();
  auto* slot_of = m.slot_of.as<int32_t>();
  auto* slot_token = m.slot_token.as<int64_t>();
  float *w = m.topk_w.as<float>(), *xd = m.xd.as<float>(), *h = m.h.as<float>(), *act = m.act.as<float>();
  float* y = m.y.as<float>();
  // The router stays f32 whatever the model's precision: a rounded logit can flip a top-k choice.
  profiled(prof, OpGroup::matmul, [&] { be_.matmul_forward(probs, x, p.gate_w, nullptr, N, C, E); });
  profiled(prof, OpGroup::activation, [&] {
    be_.moe_router_forward(probs, m.lse.as<float>(), idx, w, probs, N, E, K);
    be_.moe_dispatch_plan(slot_token, slot_of, m.counts.as<int32_t>(), m.routed.as<int32_t>(), idx, N, E, K,
                          cfg_.moe_capacity(N));
    be_.moe_router_stats(m.stats.as<float>(), probs, m.lse.as<float>(), m.routed.as<int32_t>(), N, E);
  });
  // The expert sizes cross to the host: they size the matmuls below (and backward's).
  be_.copy_to_host(m.host_counts.data(), m.counts.as<int32_t>(), static_cast<size_t>(E) * sizeof(int32_t));
  if (cp_) {  // the load-balancing loss counts the whole sequence's assignments (moe_backward)
    const size_t bytes = static_cast<size_t>(E) * sizeof(int32_t);
    be_.copy_to_host(m.host_routed.data(), m.routed.as<int32_t>(), bytes);
    cp_->all_reduce_sum(m.host_routed.data(), E);
    be_.copy_to_device(m.routed_sequence.data(), m.host_routed.data(), bytes);
  }
  const int64_t S = std::accumulate(m.host_counts.begin(), m.host_counts.end(), int64_t{0});
  record_moe_load(l, m);
  TS_CHECK(S <= moe_slots()) << "MoE layer " << l << ": " << S << " slots exceed the " << moe_slots() << " allocated";
  profiled(prof, OpGroup::embedding, [&] { be_.gather_rows(xd, x, slot_token, S, C); });
  const int64_t R = moe_dispatch(m);
  TS_CHECK(R <= moe_expert_rows()) << "MoE layer " << l << ": " << R << " rows exceed the " << moe_expert_rows()
                                   << " allocated";
  const float* xe = ep_ ? m.xr.as<float>() : xd;  // the experts' input and output rows
  float* ye = ep_ ? m.yr.as<float>() : y;
  const int64_t first_stored = store_.layout().first_stored_expert();  // 0 unless experts are sharded
  // Block b's input rows start at `in`; its hidden and output rows at b.first.
  auto run = [&](const MoeActs::Block& b, const float* in) {
    const int64_t s = b.first, n = b.rows, e = b.expert - first_stored;
    const float* fc_w = p.moe_fc_w + e * 2 * F * C;  // (2F, C) [gate | up]
    const float* proj_w = p.moe_proj_w + e * C * F;  // (C, F)
    profiled(prof, OpGroup::matmul, [&] { linear_forward(be_, precision_, h + s * 2 * F, in, fc_w, nullptr, n, C, 2 * F); });
    profiled(prof, OpGroup::activation, [&] { be_.swiglu_forward(act + s * F, h + s * 2 * F, n, F); });
    profiled(prof, OpGroup::matmul, [&] { linear_forward(be_, precision_, ye + s * C, act + s * F, proj_w, nullptr, n, F, C); });
  };
  if (ep_) {  // this rank's own rows while the others' travel
    ep_->start_rows(xd, m.send_rows.data(), m.xr.as<float>(), m.recv_rows.data(), C);
    for (const MoeActs::Block& b : m.blocks)
      if (b.source == ep_->ep_rank()) {
        run(b, xd + (m.own_send_first + b.first - m.own_recv_first) * C);
        ep_->progress_rows();
      }
    ep_->finish_rows();
  }
  for (const MoeActs::Block& b : m.blocks)
    if (!ep_ || b.source != ep_->ep_rank()) run(b, xe + b.first * C);
  if (ep_) ep_->exchange_rows(ye, m.recv_rows.data(), y, m.send_rows.data(), C);
  profiled(prof, OpGroup::residual, [&] { be_.moe_combine_forward(out, y, slot_of, w, N, K, C); });
}

void Transformer::moe_backward(int l, const float* x, const float* dout, float* dx, float scale) {
  const int64_t N = B_ * T_, C = cfg_.d_model, F = cfg_.d_ff, E = cfg_.moe_experts, K = cfg_.moe_top_k;
  MoeActs& m = acts_->layers[l - first_].moe;
  const TensorPtrs& p = w_->p[l - first_];
  const TensorPtrs& g = w_->g[l - first_];
  Acts& a = *acts_;
  OpProfile& prof = profile_;
  const int64_t S = std::accumulate(m.host_counts.begin(), m.host_counts.end(), int64_t{0});
  float *dy = a.moe_dy.as<float>(), *dxd = a.moe_dxd.as<float>(), *dh = a.moe_dh.as<float>();
  float *dact = a.moe_dact.as<float>(), *dtopk_w = a.moe_dtopk_w.as<float>(), *dlogits = a.moe_dlogits.as<float>();
  const float *xd = m.xd.as<float>(), *h = m.h.as<float>(), *act = m.act.as<float>(), *y = m.y.as<float>();
  be_.fill(dy, S * C, 0.f);
  be_.fill(dtopk_w, N * K, 0.f);
  profiled(prof, OpGroup::residual, [&] {
    be_.moe_combine_backward(dy, dtopk_w, dout, y, m.slot_of.as<int32_t>(), m.topk_w.as<float>(), N, K, C);
  });
  // The experts' rows: this rank's own (S) or, under expert parallelism, those its experts received (R).
  const int64_t R = ep_ ? std::accumulate(m.recv_rows.begin(), m.recv_rows.end(), int64_t{0}) : S;
  const float* xe = ep_ ? m.xr.as<float>() : xd;
  const float* dye = ep_ ? a.moe_dyr.as<float>() : dy;
  float* dxe = ep_ ? a.moe_dxr.as<float>() : dxd;
  be_.fill(dact, R * F, 0.f);
  be_.fill(dh, R * 2 * F, 0.f);
  be_.fill(dxe, R * C, 0.f);
  const int64_t first_stored = store_.layout().first_stored_expert();
  // Block b's output-gradient and input rows start at `dout_rows` and `in`; the rest at b.first.
  auto run = [&](const MoeActs::Block& b, const float* dout_rows, const float* in) {
    const int64_t s = b.first, n = b.rows, e = b.expert - first_stored;
    const float* fc_w = p.moe_fc_w + e * 2 * F * C;
    const float* proj_w = p.moe_proj_w + e * C * F;
    float* dfc_w = g.moe_fc_w + e * 2 * F * C;
    float* dproj_w = g.moe_proj_w + e * C * F;
    profiled(prof, OpGroup::matmul, [&] {
      linear_backward(be_, precision_, dact + s * F, dproj_w, nullptr, dout_rows, act + s * F, proj_w, n, F, C);
    });
    profiled(prof, OpGroup::activation, [&] { be_.swiglu_backward(dh + s * 2 * F, dact + s * F, h + s * 2 * F, n, F); });
    profiled(prof, OpGroup::matmul, [&] {
      linear_backward(be_, precision_, dxe + s * C, dfc_w, nullptr, dh + s * 2 * F, in, fc_w, n, C, 2 * F);
    });
  };
  if (ep_) {  // as forward: this rank's own rows while the others' output gradients travel
    ep_->start_rows(dy, m.send_rows.data(), a.moe_dyr.as<float>(), m.recv_rows.data(), C);
    for (const MoeActs::Block& b : m.blocks)
      if (b.source == ep_->ep_rank()) {
        const int64_t row = m.own_send_first + b.first - m.own_recv_first;
        run(b, dy + row * C, xd + row * C);
        ep_->progress_rows();
      }
    ep_->finish_rows();
  }
  for (const MoeActs::Block& b : m.blocks)
    if (!ep_ || b.source != ep_->ep_rank()) run(b, dye + b.first * C, xe + b.first * C);
  if (ep_) ep_->exchange_rows(dxe, m.recv_rows.data(), dxd, m.send_rows.data(), C);
  profiled(prof, OpGroup::embedding, [&] { be_.scatter_add_rows(dx, m.slot_token.as<int64_t>(), dxd, S, C); });
  be_.fill(dlogits, N * E, 0.f);
  // Context parallelism: the load-balancing loss of the whole sequence (cp x N tokens) has the
  // gradient aux x E x routed_e / (cp N)^2 per token; the cp group's gradient average divides by cp
  // once more, so this rank applies cp times that: the cp-summed counts with aux / cp.
  const int32_t* routed = cp_ ? m.routed_sequence.as<int32_t>() : m.routed.as<int32_t>();
  const float aux = cp_ ? cfg_.moe_aux_loss / static_cast<float>(cp_size_) : cfg_.moe_aux_loss;
  profiled(prof, OpGroup::activation, [&] {
    be_.moe_router_backward(dlogits, dtopk_w, m.probs.as<float>(), m.lse.as<float>(), m.topk_idx.as<int32_t>(),
                            m.topk_w.as<float>(), routed, N, E, K, aux, cfg_.moe_z_loss, scale);
  });
  profiled(prof, OpGroup::matmul, [&] { be_.matmul_backward(dx, g.gate_w, nullptr, dlogits, x, p.gate_w, N, C, E); });
}

void Transformer::record_moe_load(int l, const MoeActs& m) {
  const int64_t E = cfg_.moe_experts, N = B_ * T_, K = cfg_.moe_top_k;
  if (moe_load_.empty())
    for (int i = first_; i < last_; ++i)
      if (cfg_.is_moe_layer(i)) {
        MoeLayerLoad z;
        z.layer = i;
        z.tokens.assign(static_cast<size_t>(E), 0);
        z.routed.assign(static_cast<size_t>(E), 0);
        moe_load_.push_back(std::move(z));
      }
  auto it = std::find_if(moe_load_.begin(), moe_load_.end(), [l](const MoeLayerLoad& x) { return x.layer == l; });
  TS_CHECK(it != moe_load_.end()) << "no load record for MoE layer " << l;
  std::vector<int32_t> routed(static_cast<size_t>(E));
  float stats[3];
  be_.copy_to_host(routed.data(), m.routed.as<int32_t>(), routed.size() * sizeof(int32_t));
  be_.copy_to_host(stats, m.stats.as<float>(), sizeof stats);
  int64_t kept = 0;
  for (size_t e = 0; e < routed.size(); ++e) {
    it->tokens[e] += m.host_counts[e];
    it->routed[e] += routed[e];
    kept += m.host_counts[e];
  }
  it->dropped += N * K - kept;
  it->entropy_sum += stats[2];
  ++it->forwards;
}

std::vector<Transformer::MoeLayerLoad> Transformer::take_moe_load() {
  std::vector<MoeLayerLoad> out = std::move(moe_load_);
  moe_load_.clear();
  return out;
}

std::vector<Transformer::MoeLayerStats> Transformer::moe_layer_stats() const {
  std::vector<MoeLayerStats> out;
  const int64_t N = B_ * T_, K = cfg_.moe_top_k;
  for (int l = first_; l < last_; ++l) {
    if (!cfg_.is_moe_layer(l)) continue;
    const MoeActs& m = acts_->layers[l - first_].moe;
    MoeLayerStats st;
    st.layer = l;
    st.tokens = m.host_counts;
    st.routed = N * K;
    st.dropped = st.routed - std::accumulate(m.host_counts.begin(), m.host_counts.end(), int64_t{0});
    float stats[3];
    be_.copy_to_host(stats, m.stats.as<float>(), sizeof stats);
    st.load_balance = stats[0];
    st.z = stats[1];
    st.entropy = stats[2];
    out.push_back(std::move(st));
  }
  return out;
}

double Transformer::moe_objective() const {
  double sum = 0;
  for (const MoeLayerStats& st : moe_layer_stats())
    sum += static_cast<double>(cfg_.moe_aux_loss) * st.load_balance + static_cast<double>(cfg_.moe_z_loss) * st.z;
  return sum;
}

}  // namespace tessera
