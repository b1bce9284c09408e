// Attention on the GPU (backend/ops.h: attention_forward/backward and the ring's attention_block_*).
//
// One warp per output row, lanes splitting the head dimension (lane owns d = lane + 32c), so any
// HS <= 256 fits in registers and every dot product is a warp butterfly sum: fixed order, and every
// lane ends with the same bits, so branches on a score never diverge. Scores are recomputed where
// needed and never stored: no T x T matrix, no atomics, one writer per output element.
//   forward: warp per (b, h, query), online softmax over the visible keys.
//   backward: delta = rowsum(dout * out); then warp per (b, h, query) owning dq, and warp per
//   (b, kv head, key) owning dk, dv, looping over the group's query heads and the queries that see it.
// attention_forward/backward are the block ops on the whole sequence with the causal mask: q, k, v
// (and dq, dk, dv) are column offsets into qkv (dqkv) with its row width as stride.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/cuda/cuda_kernels.h"
#include "core/log.h"

namespace tessera::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;
constexpr int64_t kMaxHS = 256;  // 8 registers per lane per row vector

// Butterfly sum over the warp. IEEE addition is commutative, so both lanes of every exchange form
// the same value: all 32 lanes return identical bits.
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = kWarp / 2; o > 0; o >>= 1) x += __shfl_xor_sync(kFullMask, x, o);
  return x;
}
__device__ __forceinline__ double warp_sum(double x) {
  for (int o = kWarp / 2; o > 0; o >>= 1) x += __shfl_xor_sync(kFullMask, x, o);
  return x;
}

// One (query chunk, kv chunk) pair in the layout of ops.h's attention_block_*.
struct Pair {
  const float* q;
  int64_t q_stride;
  const float* k;
  const float* v;
  int64_t kv_stride;
  int64_t B, Tq, Tk, NH, NKV, HS, group;
  bool causal;  // query i sees keys 0..i (Tq == Tk); else every key
  float scale;
};

Pair pair_of(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride, int64_t B,
               int64_t Tq, int64_t Tk, int64_t NH, int64_t NKV, int64_t HS, bool causal) {
  TS_CHECK(NH > 0 && NKV > 0 && HS > 0 && NH % NKV == 0)
      << "attention needs NH a positive multiple of NKV and HS > 0, got NH=" << NH << " NKV=" << NKV << " HS=" << HS;
  TS_CHECK(HS <= kMaxHS) << "CUDA attention supports HS <= " << kMaxHS << ", got " << HS;
  TS_CHECK(!causal || Tq == Tk) << "attention: the causal mask needs Tq == Tk, got Tq=" << Tq << " Tk=" << Tk;
  // The CPU's scale: computed in float, so both backends score with the same constant.
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  return {q, q_stride, k, v, kv_stride, B, Tq, Tk, NH, NKV, HS, NH / NKV, causal, scale};
}

// Blocks of kWarpsPerBlock warps, one warp per row; false when there is nothing to launch.
bool warp_grid(int64_t rows, unsigned& blocks) {
  if (rows <= 0) return false;
  const int64_t n = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  TS_CHECK(n <= std::numeric_limits<int>::max()) << "attention: " << rows << " rows exceed one grid";
  blocks = static_cast<unsigned>(n);
  return true;
}

// Calls f(std::integral_constant<int, NPL>) with NPL = floats per lane covering HS (1, 2, 4 or 8).
template <typename F>
void with_lanes(int64_t HS, F&& f) {
  if (HS <= 32) f(std::integral_constant<int, 1>{});
  else if (HS <= 64) f(std::integral_constant<int, 2>{});
  else if (HS <= 128) f(std::integral_constant<int, 4>{});
  else f(std::integral_constant<int, 8>{});
}

// Loads this lane's slice of a head vector (zero past HS, so dot products ignore those slots).
template <int NPL>
__device__ __forceinline__ void load_row(float (&r)[NPL], const float* p, int lane, int64_t HS) {
#pragma unroll
  for (int c = 0; c < NPL; ++c) {
    const int64_t d = lane + kWarp * c;
    r[c] = d < HS ? p[d] : 0.0f;
  }
}

template <int NPL>
__device__ __forceinline__ float dot_row(const float (&r)[NPL], const float* p, int lane, int64_t HS) {
  float part = 0.0f;
#pragma unroll
  for (int c = 0; c < NPL; ++c) {
    const int64_t d = lane + kWarp * c;
    if (d < HS) part += r[c] * p[d];
  }
  return warp_sum(part);
}

// The same for two rows in registers (slots past HS are zero in both).
template <int NPL>
__device__ __forceinline__ float dot_regs(const float (&a)[NPL], const float (&b)[NPL]) {
  float part = 0.0f;
#pragma unroll
  for (int c = 0; c < NPL; ++c) part += a[c] * b[c];
  return warp_sum(part);
}

// Which (b, h, query) a warp owns. Queries run last to first so that, under the causal mask, the
// longest rows are scheduled first.
struct QueryRow {
  int64_t b, h, i;
  bool valid;
};
__device__ __forceinline__ QueryRow query_row(const Pair& g) {
  const int64_t w = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (w >= g.B * g.NH * g.Tq) return {0, 0, 0, false};
  const int64_t bh = w / g.Tq;
  return {bh / g.NH, bh % g.NH, g.Tq - 1 - w % g.Tq, true};
}

// ---- forward ----

// kMerge = false: out, lse are overwritten with this pair's softmax output and log-sum-exp (f32, as
// ops::attention_forward). kMerge = true: they are the running accumulators of attention_block_forward,
// merged in double as the CPU does.
template <int NPL, bool kMerge>
__global__ void forward_kernel(float* out, float* lse, Pair g) {
  const QueryRow r = query_row(g);
  if (!r.valid) return;  // whole warps only: rows are per warp
  const int lane = threadIdx.x % kWarp;
  const int64_t HS = g.HS, kvh = r.h / g.group;
  const float* kb = g.k + r.b * g.Tk * g.kv_stride + kvh * HS;
  const float* vb = g.v + r.b * g.Tk * g.kv_stride + kvh * HS;
  float qr[NPL], acc[NPL];
  load_row(qr, g.q + (r.b * g.Tq + r.i) * g.q_stride + r.h * HS, lane, HS);
#pragma unroll
  for (int c = 0; c < NPL; ++c) acc[c] = 0.0f;

  // Online softmax: acc and l are relative to the running max m.
  const int64_t nk = g.causal ? r.i + 1 : g.Tk;
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = 0; j < nk; ++j) {
    const float s = g.scale * dot_row(qr, kb + j * g.kv_stride, lane, HS);
    if (s > m) {  // same s on every lane: no divergence
      const float alpha = expf(m - s);  // 0 on the first key (m = -inf)
      l *= alpha;
#pragma unroll
      for (int c = 0; c < NPL; ++c) acc[c] *= alpha;
      m = s;
    }
    const float p = expf(s - m);
    l += p;
    const float* vj = vb + j * g.kv_stride;
#pragma unroll
    for (int c = 0; c < NPL; ++c) {
      const int64_t d = lane + kWarp * c;
      if (d < HS) acc[c] += p * vj[d];
    }
  }

  float* o = out + (r.b * g.Tq + r.i) * (g.NH * HS) + r.h * HS;
  float* lse_i = lse + (r.b * g.NH + r.h) * g.Tq + r.i;
  if constexpr (!kMerge) {
    const float inv = 1.0f / l;
#pragma unroll
    for (int c = 0; c < NPL; ++c) {
      const int64_t d = lane + kWarp * c;
      if (d < HS) o[d] = acc[c] * inv;
    }
    if (lane == 0) *lse_i = m + logf(l);
  } else {
    // Read by lane 0 and broadcast: the shuffle also orders every lane's read before lane 0's write.
    const double lse_old = __shfl_sync(kFullMask, lane == 0 ? *lse_i : 0.0f, 0);
    const double sum = l;
    const double lse_blk = static_cast<double>(m) + log(sum);
    const double lse_new =
        lse_old == -INFINITY ? lse_blk : fmax(lse_old, lse_blk) + log1p(exp(-fabs(lse_old - lse_blk)));
    const double w_old = exp(lse_old - lse_new);  // 0 on the first block
    const double w_blk = exp(lse_blk - lse_new) / sum;
#pragma unroll
    for (int c = 0; c < NPL; ++c) {
      const int64_t d = lane + kWarp * c;
      if (d < HS) o[d] = static_cast<float>(w_old * o[d] + w_blk * acc[c]);
    }
    if (lane == 0) *lse_i = static_cast<float>(lse_new);
  }
}

template <bool kMerge>
void launch_forward(Launch l, float* out, float* lse, const Pair& g) {
  unsigned blocks = 0;
  if (!warp_grid(g.B * g.NH * g.Tq, blocks)) return;
  with_lanes(g.HS, [&](auto npl) {
    forward_kernel<decltype(npl)::value, kMerge><<<blocks, kWarpsPerBlock * kWarp, 0, l.stream>>>(out, lse, g);
  });
}

// ---- backward ----

// delta(B,NH,Tq) = rowsum(dout * out) per head, summed in double (the CPU block op's precision).
__global__ void delta_kernel(float* delta, const float* dout, const float* out, int64_t B, int64_t Tq, int64_t NH,
                             int64_t HS) {
  const int64_t w = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (w >= B * NH * Tq) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t i = w % Tq, bh = w / Tq, b = bh / NH, h = bh % NH;
  const int64_t at = (b * Tq + i) * (NH * HS) + h * HS;
  double part = 0.0;
  for (int64_t d = lane; d < HS; d += kWarp) part += static_cast<double>(dout[at + d]) * out[at + d];
  const double s = warp_sum(part);
  if (lane == 0) delta[w] = static_cast<float>(s);  // w = (b*NH + h)*Tq + i
}

void launch_delta(Launch l, float* delta, const float* dout, const float* out, int64_t B, int64_t Tq, int64_t NH,
                  int64_t HS) {
  unsigned blocks = 0;
  if (!warp_grid(B * NH * Tq, blocks)) return;
  delta_kernel<<<blocks, kWarpsPerBlock * kWarp, 0, l.stream>>>(delta, dout, out, B, Tq, NH, HS);
}

// dq += scale * sum_j dS_ij k_j over the keys query i sees; dS = P * (dP - delta), P = exp(s - lse)
// with the FINAL lse, dP = dout_i . v_j.
template <int NPL>
__global__ void dq_kernel(float* dq, int64_t dq_stride, const float* dout, const float* lse, const float* delta,
                          Pair g) {
  const QueryRow r = query_row(g);
  if (!r.valid) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t HS = g.HS, kvh = r.h / g.group;
  const float* kb = g.k + r.b * g.Tk * g.kv_stride + kvh * HS;
  const float* vb = g.v + r.b * g.Tk * g.kv_stride + kvh * HS;
  float qr[NPL], dor[NPL], acc[NPL];
  load_row(qr, g.q + (r.b * g.Tq + r.i) * g.q_stride + r.h * HS, lane, HS);
  load_row(dor, dout + (r.b * g.Tq + r.i) * (g.NH * HS) + r.h * HS, lane, HS);
#pragma unroll
  for (int c = 0; c < NPL; ++c) acc[c] = 0.0f;
  const int64_t at = (r.b * g.NH + r.h) * g.Tq + r.i;
  const float lse_i = lse[at], delta_i = delta[at];

  const int64_t nk = g.causal ? r.i + 1 : g.Tk;
  for (int64_t j = 0; j < nk; ++j) {
    const float* kj = kb + j * g.kv_stride;
    const float s = g.scale * dot_row(qr, kj, lane, HS);
    const float dp = dot_row(dor, vb + j * g.kv_stride, lane, HS);
    const float ds = expf(s - lse_i) * (dp - delta_i) * g.scale;  // scale folded in once
#pragma unroll
    for (int c = 0; c < NPL; ++c) {
      const int64_t d = lane + kWarp * c;
      if (d < HS) acc[c] += ds * kj[d];
    }
  }
  float* dqi = dq + (r.b * g.Tq + r.i) * dq_stride + r.h * HS;
#pragma unroll
  for (int c = 0; c < NPL; ++c) {
    const int64_t d = lane + kWarp * c;
    if (d < HS) dqi[d] += acc[c];
  }
}

// One warp per (b, kv head, key j): dv_j += sum P_ij dout_i, dk_j += scale * sum dS_ij q_i over the
// group's query heads (ascending) and the queries that see key j (ascending). It alone writes them.
template <int NPL>
__global__ void dkdv_kernel(float* dk, float* dv, int64_t dkv_stride, const float* dout, const float* lse,
                            const float* delta, Pair g) {
  const int64_t w = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (w >= g.B * g.NKV * g.Tk) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t HS = g.HS, CO = g.NH * HS;
  const int64_t j = w % g.Tk, bg = w / g.Tk, b = bg / g.NKV, kvh = bg % g.NKV;
  float kr[NPL], vr[NPL], dk_acc[NPL], dv_acc[NPL];
  load_row(kr, g.k + (b * g.Tk + j) * g.kv_stride + kvh * HS, lane, HS);
  load_row(vr, g.v + (b * g.Tk + j) * g.kv_stride + kvh * HS, lane, HS);
#pragma unroll
  for (int c = 0; c < NPL; ++c) dk_acc[c] = dv_acc[c] = 0.0f;

  const int64_t i0 = g.causal ? j : 0;  // causal: only queries i >= j see key j
  for (int64_t h = kvh * g.group; h < (kvh + 1) * g.group; ++h) {
    const float* lse_h = lse + (b * g.NH + h) * g.Tq;
    const float* delta_h = delta + (b * g.NH + h) * g.Tq;
    for (int64_t i = i0; i < g.Tq; ++i) {
      float qi[NPL], doi[NPL];
      load_row(qi, g.q + (b * g.Tq + i) * g.q_stride + h * HS, lane, HS);
      load_row(doi, dout + (b * g.Tq + i) * CO + h * HS, lane, HS);
      const float s = g.scale * dot_regs(kr, qi);
      const float dp = dot_regs(vr, doi);
      const float p = expf(s - lse_h[i]);
      const float ds = p * (dp - delta_h[i]) * g.scale;
#pragma unroll
      for (int c = 0; c < NPL; ++c) {
        dv_acc[c] += p * doi[c];  // slots past HS hold zeros
        dk_acc[c] += ds * qi[c];
      }
    }
  }
  float* dkj = dk + (b * g.Tk + j) * dkv_stride + kvh * HS;
  float* dvj = dv + (b * g.Tk + j) * dkv_stride + kvh * HS;
#pragma unroll
  for (int c = 0; c < NPL; ++c) {
    const int64_t d = lane + kWarp * c;
    if (d < HS) {
      dkj[d] += dk_acc[c];
      dvj[d] += dv_acc[c];
    }
  }
}

// dq and dk/dv are written by different kernels; in attention_backward they are disjoint columns of
// dqkv, so the order between them does not matter.
void launch_backward(Launch l, float* dq, int64_t dq_stride, float* dk, float* dv, int64_t dkv_stride,
                     const float* dout, const float* lse, const float* delta, const Pair& g) {
  const unsigned threads = kWarpsPerBlock * kWarp;
  unsigned blocks = 0;
  if (warp_grid(g.B * g.NH * g.Tq, blocks))
    with_lanes(g.HS, [&](auto npl) {
      dq_kernel<decltype(npl)::value><<<blocks, threads, 0, l.stream>>>(dq, dq_stride, dout, lse, delta, g);
    });
  if (warp_grid(g.B * g.NKV * g.Tk, blocks))
    with_lanes(g.HS, [&](auto npl) {
      dkdv_kernel<decltype(npl)::value><<<blocks, threads, 0, l.stream>>>(dk, dv, dkv_stride, dout, lse, delta, g);
    });
}

}  // namespace

void attention_forward(Launch l, float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t NH,
                       int64_t NKV, int64_t HS) {
  if (B <= 0 || T <= 0) return;
  const int64_t C3 = (NH + 2 * NKV) * HS;
  const Pair g = pair_of(qkv, C3, qkv + NH * HS, qkv + (NH + NKV) * HS, C3, B, T, T, NH, NKV, HS, true);
  launch_forward<false>(l, out, lse, g);
}

void attention_backward(Launch l, float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS) {
  if (B <= 0 || T <= 0) return;
  const int64_t C3 = (NH + 2 * NKV) * HS;
  const Pair g = pair_of(qkv, C3, qkv + NH * HS, qkv + (NH + NKV) * HS, C3, B, T, T, NH, NKV, HS, true);
  // The only scratch this launcher takes, so it stays valid for all three kernels.
  float* delta = static_cast<float*>(l.scratch->take(static_cast<size_t>(B * NH * T) * sizeof(float)));
  launch_delta(l, delta, dout, out, B, T, NH, HS);
  launch_backward(l, dqkv, C3, dqkv + NH * HS, dqkv + (NH + NKV) * HS, C3, dout, lse, delta, g);
}

void attention_block_forward(Launch l, float* out, float* lse, const float* q, int64_t q_stride, const float* k,
                             const float* v, int64_t kv_stride, int64_t B, int64_t Tq, int64_t Tk, int64_t NH,
                             int64_t NKV, int64_t HS, ops::BlockMask mask) {
  const Pair g = pair_of(q, q_stride, k, v, kv_stride, B, Tq, Tk, NH, NKV, HS, mask == ops::BlockMask::causal);
  // No keys: nothing to merge (a block of zero mass would only divide 0 by 0).
  if (Tk <= 0) return;
  launch_forward<true>(l, out, lse, g);
}

void attention_block_delta(Launch l, float* delta, const float* dout, const float* out, int64_t B, int64_t Tq,
                           int64_t NH, int64_t HS) {
  launch_delta(l, delta, dout, out, B, Tq, NH, HS);
}

void attention_block_backward(Launch l, float* dq, int64_t dq_stride, float* dk, float* dv, int64_t dkv_stride,
                              const float* dout, const float* q, int64_t q_stride, const float* k, const float* v,
                              int64_t kv_stride, const float* lse, const float* delta, int64_t B, int64_t Tq,
                              int64_t Tk, int64_t NH, int64_t NKV, int64_t HS, ops::BlockMask mask) {
  const Pair g = pair_of(q, q_stride, k, v, kv_stride, B, Tq, Tk, NH, NKV, HS, mask == ops::BlockMask::causal);
  launch_backward(l, dq, dq_stride, dk, dv, dkv_stride, dout, lse, delta, g);
}

}  // namespace tessera::cuda
