// Ring attention in the Transformer (context_parallel_hooks.h, cp_mode "ring").
//
// Rank r of p holds the query pieces r and 2p-1-r (each B x h rows, h = T/2 of the rank's T) and
// starts with the keys and values of the same pieces. At step s it holds those of rank j = r - s
// (mod p), sends them on to rank r+1 while it attends to them, and receives rank j-1's: after p
// steps every query has seen every key. Query piece a sees key piece b fully when b < a, causally
// when b == a and not at all when b > a; with the balanced pieces every rank computes two full
// pairs' worth at every step (step 0: the two diagonals and one full pair), so none idles.
//
// Forward merges each pair into (atty, lse) by log-sum-exp (ops::attention_block_forward). Backward
// needs the final lse only: each pair's gradients simply add. The key/value gradients of rank j's
// pieces travel with them: each rank adds its contribution to the sum arriving from the previous
// rank and passes it on, computing its own contribution while the sum is in flight; after p steps
// the sum is complete and arrives at its owner.
#include <limits>
#include <vector>

#include "core/log.h"
#include "model/transformer_state.h"

namespace tessera {

namespace {

// Calls f(query piece, key piece, mask) for the pairs in which rank r's queries see rank j's keys,
// in a fixed order (so every run merges the same partial results in the same order).
template <typename F>
void for_each_visible_pair(int64_t r, int64_t j, int64_t p, F f) {
  auto chunk = [p](int64_t rank, int piece) { return piece == 0 ? rank : 2 * p - 1 - rank; };
  for (int qp = 0; qp < 2; ++qp)
    for (int kp = 0; kp < 2; ++kp) {
      const int64_t a = chunk(r, qp), b = chunk(j, kp);
      if (b < a) f(qp, kp, ops::BlockMask::full);
      else if (b == a) f(qp, kp, ops::BlockMask::causal);
    }
}

}  // namespace

void Transformer::build_ring_rows() {
  const Dims d = dims();
  const int64_t heads = d.NH + 2 * d.NKV, kv_heads = 2 * d.NKV;
  std::vector<int64_t> rows(static_cast<size_t>(d.N * kv_heads));
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t j = 0; j < kv_heads; ++j) rows[n * kv_heads + j] = n * heads + d.NH + j;
  const size_t bytes = rows.size() * sizeof(int64_t);
  acts_->ring_kv_rows = be_.allocate(bytes, MemCategory::activations);
  be_.copy_to_device(acts_->ring_kv_rows.data(), rows.data(), bytes);
  acts_->bytes += bytes;
}

void Transformer::ring_attention_forward(const LayerView& v) {
  const Dims d = dims();
  Acts& a = *acts_;
  const int64_t p = cp_size_, r = cp_rank_, h = d.T / 2, Bh = d.B * h, KV = 2 * d.NKV * d.HS;
  float* kv[2] = {a.ring_kv[0].as<float>(), a.ring_kv[1].as<float>()};
  be_.fill(v.atty, d.N * d.A, 0.f);
  be_.fill(v.lse, d.B * d.NH * d.T, -std::numeric_limits<float>::infinity());
  be_.gather_rows(kv[0], v.qkv, a.ring_kv_rows.as<int64_t>(), d.N * 2 * d.NKV, d.HS);
  for (int64_t s = 0; s < p; ++s) {
    const bool more = s + 1 < p;
    const float* in_hand = kv[s % 2];
    if (more) cp_->ring_start(0, in_hand, kv[(s + 1) % 2], d.N * KV);
    for_each_visible_pair(r, (r - s + p) % p, p, [&](int qp, int kp, ops::BlockMask mask) {
      const float* k = in_hand + kp * Bh * KV;
      be_.attention_block_forward(v.atty + qp * Bh * d.A, v.lse + qp * d.B * d.NH * h, v.qkv + qp * Bh * d.Q, d.Q, k,
                                  k + d.NKV * d.HS, KV, d.B, h, h, d.NH, d.NKV, d.HS, mask);
      cp_->ring_progress();
    });
    if (more) cp_->ring_wait(0);
  }
}

void Transformer::ring_attention_backward(const LayerView& v, const float* datty, float* dqkv) {
  const Dims d = dims();
  Acts& a = *acts_;
  const int64_t p = cp_size_, r = cp_rank_, h = d.T / 2, Bh = d.B * h, KV = 2 * d.NKV * d.HS;
  float* kv[2] = {a.ring_kv[0].as<float>(), a.ring_kv[1].as<float>()};
  float* dkv[2] = {a.ring_dkv[0].as<float>(), a.ring_dkv[1].as<float>()};
  float* dkv_in = a.ring_dkv_in.as<float>();
  float* delta = a.ring_delta.as<float>();
  const int64_t* kv_rows = a.ring_kv_rows.as<int64_t>();
  for (int qp = 0; qp < 2; ++qp)
    be_.attention_block_delta(delta + qp * d.B * d.NH * h, datty + qp * Bh * d.A, v.atty + qp * Bh * d.A, d.B, h,
                              d.NH, d.HS);
  be_.gather_rows(kv[0], v.qkv, kv_rows, d.N * 2 * d.NKV, d.HS);
  for (int64_t s = 0; s < p; ++s) {
    const bool more = s + 1 < p;
    const float* in_hand = kv[s % 2];
    float* mine = dkv[s % 2];  // this step's contribution; the previous step's is still in flight
    if (more) cp_->ring_start(0, in_hand, kv[(s + 1) % 2], d.N * KV);
    be_.fill(mine, d.N * KV, 0.f);
    for_each_visible_pair(r, (r - s + p) % p, p, [&](int qp, int kp, ops::BlockMask mask) {
      const float* k = in_hand + kp * Bh * KV;
      float* dk = mine + kp * Bh * KV;
      const float* q = v.qkv + qp * Bh * d.Q;
      be_.attention_block_backward(dqkv + qp * Bh * d.Q, d.Q, dk, dk + d.NKV * d.HS, KV, datty + qp * Bh * d.A, q,
                                   d.Q, k, k + d.NKV * d.HS, KV, v.lse + qp * d.B * d.NH * h,
                                   delta + qp * d.B * d.NH * h, d.B, h, h, d.NH, d.NKV, d.HS, mask);
      cp_->ring_progress();
    });
    if (s > 0) {  // the sum over the ranks before this one, for the same keys and values
      cp_->ring_wait(1);
      be_.add(mine, mine, dkv_in, d.N * KV);
    }
    cp_->ring_start(1, mine, dkv_in, d.N * KV);  // on to the next rank (after the last step: home)
    if (more) cp_->ring_wait(0);
  }
  cp_->ring_wait(1);  // dkv_in: the complete gradients of this rank's own keys and values
  be_.scatter_add_rows(dqkv, kv_rows, dkv_in, d.N * 2 * d.NKV, d.HS);
}

}  // namespace tessera
