// Context parallelism in the Transformer (context_parallel_hooks.h): the Ulysses exchanges around
// attention (ring attention: transformer_ring_attention.cpp). Every activation is viewed as rows of HS floats (one head of one token), so each
// re-arrangement is a row gather into cp blocks, one all-to-all and a row gather out of them; the
// gathers' row indices are computed once per activation shape.
#include <vector>

#include "core/log.h"
#include "model/transformer_state.h"

namespace tessera {

namespace {

// Which heads of a row belong to head group s: per segment (q, k, v), `per_group` heads starting at
// first + s * per_group.
struct HeadSegment {
  int64_t first, per_group;
};

// The sequence split has B x T rows of H heads (segments' heads); the head split has B x cp*T rows
// of H/cp heads. Block s of the all-to-all holds (B, T, H/cp): what rank s needs, or what came from
// rank s. Indices are in HS-wide rows.
struct SplitShape {
  int64_t B, T, cp, H;
  std::vector<HeadSegment> segments;
  int64_t group_heads() const { return H / cp; }
  // The sequence split's row of head j (of group s's H/cp) at (b, t).
  int64_t seq_row(int64_t s, int64_t b, int64_t t, int64_t j) const {
    for (const HeadSegment& g : segments) {
      if (j < g.per_group) return (b * T + t) * H + g.first + s * g.per_group + j;
      j -= g.per_group;
    }
    TS_CHECK(false) << "head index beyond the segments";
    return 0;
  }
  // Row of head j at (b, t) in block s.
  int64_t block_row(int64_t s, int64_t b, int64_t t, int64_t j) const {
    return ((s * B + b) * T + t) * group_heads() + j;
  }
  // The head split's row of head j at (b, position s*T + t).
  int64_t heads_row(int64_t s, int64_t b, int64_t t, int64_t j) const {
    return (b * cp * T + s * T + t) * group_heads() + j;
  }
};

// to_heads: pack[block_row(s,...)] = seq_row(s,...); unpack[heads_row(r,...)] = block_row(r,...).
// to_seq:   pack[block_row(s,...)] = heads_row(s,...); unpack[seq_row(r,...)] = block_row(r,...).
void route_indices(const SplitShape& sh, bool to_heads, std::vector<int64_t>& pack, std::vector<int64_t>& unpack) {
  const int64_t rows = sh.B * sh.T * sh.H;
  pack.assign(rows, -1);
  unpack.assign(rows, -1);
  for (int64_t s = 0; s < sh.cp; ++s)
    for (int64_t b = 0; b < sh.B; ++b)
      for (int64_t t = 0; t < sh.T; ++t)
        for (int64_t j = 0; j < sh.group_heads(); ++j) {
          const int64_t blk = sh.block_row(s, b, t, j);
          if (to_heads) {
            pack[blk] = sh.seq_row(s, b, t, j);
            unpack[sh.heads_row(s, b, t, j)] = blk;
          } else {
            pack[blk] = sh.heads_row(s, b, t, j);
            unpack[sh.seq_row(s, b, t, j)] = blk;
          }
        }
  for (int64_t i = 0; i < rows; ++i) TS_CHECK(pack[i] >= 0 && unpack[i] >= 0) << "context-parallel route has a hole";
}

}  // namespace

void Transformer::set_context_parallel_hooks(ContextParallelHooks* hooks) {
  const int size = hooks ? hooks->cp_size() : 1;
  const bool ring = size > 1 && hooks->mode() == ContextParallelMode::ring;
  const Dims d = dims();
  if (size > 1) {
    if (ring)
      TS_CHECK(d.T % 2 == 0) << "ring context parallelism gives each rank two pieces of every sequence: the rank's "
                             << d.T << " positions must be even";
    else
      TS_CHECK(d.NH % size == 0 && d.NKV % size == 0)
          << "context parallelism (ulysses) over " << size << " ranks needs the heads (" << d.NH
          << ") and KV heads (" << d.NKV << ") of each tensor-parallel rank to be divisible by it";
    TS_CHECK(!cfg_.is_moe() || cfg_.moe_capacity_factor == 0)
        << "context parallelism supports mixture-of-experts layers only dropless (model.moe_capacity_factor = 0): "
           "a capacity drops assignments in the order of the whole micro-batch's tokens, which cp splits";
  }
  cp_ = size > 1 ? hooks : nullptr;
  cp_rank_ = size > 1 ? hooks->cp_rank() : 0;
  cp_size_ = size;
  cp_ring_ = ring;
  allocate_activations();
}

void Transformer::build_cp_routes() {
  const Dims d = dims();
  const int64_t p = cp_size_, NHc = d.NH / p, NKVc = d.NKV / p;
  const SplitShape qkv{d.B, d.T, p, d.NH + 2 * d.NKV, {{0, NHc}, {d.NH, NKVc}, {d.NH + d.NKV, NKVc}}};
  const SplitShape atty{d.B, d.T, p, d.NH, {{0, NHc}}};
  auto upload = [this](const SplitShape& sh, bool to_heads, CpRoute& route) {
    std::vector<int64_t> pack, unpack;
    route_indices(sh, to_heads, pack, unpack);
    const size_t bytes = pack.size() * sizeof(int64_t);
    route.rows = static_cast<int64_t>(pack.size());
    route.pack = be_.allocate(bytes, MemCategory::activations);
    route.unpack = be_.allocate(bytes, MemCategory::activations);
    be_.copy_to_device(route.pack.data(), pack.data(), bytes);
    be_.copy_to_device(route.unpack.data(), unpack.data(), bytes);
    acts_->bytes += 2 * bytes;
  };
  Acts& a = *acts_;
  upload(qkv, true, a.qkv_to_heads);
  upload(qkv, false, a.qkv_to_seq);
  upload(atty, true, a.atty_to_heads);
  upload(atty, false, a.atty_to_seq);
}

void Transformer::cp_exchange(const float* in, float* out, const CpRoute& route) {
  const int64_t HS = cfg_.head_size();
  float *send = acts_->cp_send.as<float>(), *recv = acts_->cp_recv.as<float>();
  be_.gather_rows(send, in, route.pack.as<int64_t>(), route.rows, HS);
  cp_->all_to_all(send, recv, route.rows * HS / cp_size_);
  be_.gather_rows(out, recv, route.unpack.as<int64_t>(), route.rows, HS);
}

void Transformer::cp_attention_forward(const LayerView& v, const float* qkv_local, float* atty) {
  const Dims d = dims();
  const int64_t p = cp_size_, T = d.T * p, NH = d.NH / p, NKV = d.NKV / p;
  Acts& a = *acts_;
  cp_exchange(qkv_local, v.qkv, a.qkv_to_heads);
  if (d.llama) be_.rope_forward(v.qkv, d.B, T, NH, NKV, d.HS, cfg_.rope_theta);
  be_.attention_forward(v.atty_heads, v.lse, v.qkv, d.B, T, NH, NKV, d.HS);
  cp_exchange(v.atty_heads, atty, a.atty_to_seq);
}

void Transformer::cp_attention_backward(const LayerView& v, const float* datty, float* dqkv) {
  const Dims d = dims();
  const int64_t p = cp_size_, T = d.T * p, NH = d.NH / p, NKV = d.NKV / p;
  Acts& a = *acts_;
  float *datty_heads = a.cp_datty_heads.as<float>(), *dqkv_heads = a.cp_dqkv_heads.as<float>();
  cp_exchange(datty, datty_heads, a.atty_to_heads);
  be_.fill(dqkv_heads, d.N * d.Q, 0.f);
  be_.attention_backward(dqkv_heads, datty_heads, v.qkv, v.atty_heads, v.lse, d.B, T, NH, NKV, d.HS);
  if (d.llama) be_.rope_backward(dqkv_heads, d.B, T, NH, NKV, d.HS, cfg_.rope_theta);
  cp_exchange(dqkv_heads, dqkv, a.qkv_to_seq);
}

}  // namespace tessera
