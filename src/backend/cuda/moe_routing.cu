// Mixture-of-experts routing on the device (ops.h; cpu/moe_routing.cpp is the oracle): the softmax
// top-k router, the dispatch plan, the weighted combine and the router's losses and gradient. The
// per-row ops give a row (or a row's element) to one thread that runs the CPU's loop in its order,
// with the CPU's roundings: g++ (-O3 -march=x86-64-v3) contracts some of those expressions into fused
// multiply-adds, and those are written here as explicit fmas, the others as separately rounded
// operations, so nvcc's own contraction cannot change them.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "backend/cuda/cuda_kernels.h"

namespace tessera::cuda {
namespace {

constexpr int kThreads = 256;

__device__ int64_t thread_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }

// One thread per token row.
__global__ void router_forward_kernel(float* probs, float* lse, int32_t* topk_idx, float* topk_w,
                                      const float* logits, int64_t N, int64_t E, int64_t K) {
  const int64_t n = thread_index();
  if (n >= N) return;
  const float* z = logits + n * E;
  float* p = probs + n * E;  // may be z: each z[e] is read before p[e] is written
  float mx = -INFINITY;
  for (int64_t e = 0; e < E; ++e) mx = mx < z[e] ? z[e] : mx;  // std::max(mx, z[e])
  double sum = 0;
  for (int64_t e = 0; e < E; ++e) sum = __dadd_rn(sum, exp(__dsub_rn(static_cast<double>(z[e]), mx)));
  const double log_sum = log(sum);
  lse[n] = __double2float_rn(__dadd_rn(static_cast<double>(mx), log_sum));
  for (int64_t e = 0; e < E; ++e)
    p[e] = __double2float_rn(__ddiv_rn(exp(__dsub_rn(static_cast<double>(z[e]), mx)), sum));
  // Repeated arg-max: strictly greater wins, so equal probabilities go to the lower index.
  int32_t* idx = topk_idx + n * K;
  double sel = 0;
  for (int64_t k = 0; k < K; ++k) {
    int32_t best = -1;
    for (int64_t e = 0; e < E; ++e) {
      bool taken = false;
      for (int64_t j = 0; j < k; ++j) taken = taken || idx[j] == e;
      if (!taken && (best < 0 || p[e] > p[best])) best = static_cast<int32_t>(e);
    }
    idx[k] = best;
    sel = __dadd_rn(sel, static_cast<double>(p[best]));
  }
  for (int64_t k = 0; k < K; ++k) topk_w[n * K + k] = __double2float_rn(__ddiv_rn(p[idx[k]], sel));
}

__device__ int64_t kept(int64_t routed, int64_t capacity) {
  return capacity > 0 && routed > capacity ? capacity : routed;
}

// One block per expert: its assignments before dropping (an integer sum, exact in any order).
__global__ void routed_count_kernel(int32_t* routed, const int32_t* topk_idx, int64_t NK) {
  const int64_t e = blockIdx.x;
  int count = 0;
  for (int64_t i = threadIdx.x; i < NK; i += blockDim.x) count += topk_idx[i] == e;
  using Reduce = cub::BlockReduce<int, kThreads>;
  __shared__ typename Reduce::TempStorage temp;
  const int total = Reduce(temp).Sum(count);
  if (threadIdx.x == 0) routed[e] = total;
}

// One block per expert walks the assignments in priority order (q = k * N + n: choice rank first,
// then token order) a tile at a time; a block scan gives each of the expert's assignments its rank
// among them, which is the CPU's counts[e] at the time it meets it while that stays below capacity.
__global__ void dispatch_kernel(int64_t* slot_token, int32_t* slot_of, int32_t* counts, const int32_t* routed,
                                const int32_t* topk_idx, int64_t N, int64_t K, int64_t capacity) {
  const int64_t e = blockIdx.x;
  int64_t start = 0;  // slots of expert e follow the kept slots of the experts before it
  for (int64_t f = 0; f < e; ++f) start += kept(routed[f], capacity);
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage temp;
  const int64_t NK = N > 0 && K > 0 ? N * K : 0;
  int64_t met = 0;  // the expert's assignments in the tiles before this one
  for (int64_t q0 = 0; q0 < NK; q0 += kThreads) {
    const int64_t q = q0 + threadIdx.x;
    const int64_t n = q % N, i = n * K + q / N;
    const int mine = q < NK && topk_idx[i] == e ? 1 : 0;
    int rank = 0, tile_total = 0;
    Scan(temp).ExclusiveSum(mine, rank, tile_total);
    if (mine) {
      const int64_t r = met + rank;
      if (capacity > 0 && r >= capacity) {
        slot_of[i] = -1;
      } else {
        slot_token[start + r] = n;
        slot_of[i] = static_cast<int32_t>(start + r);
      }
    }
    met += tile_total;
    __syncthreads();  // the scan's storage is reused by the next tile
  }
  if (threadIdx.x == 0) counts[e] = static_cast<int32_t>(kept(met, capacity));
}

// One thread per output element, the kept assignments in k order: o += w * y is one fma on the CPU.
__global__ void combine_forward_kernel(float* out, const float* y, const int32_t* slot_of, const float* topk_w,
                                       int64_t N, int64_t K, int64_t C) {
  const int64_t i = thread_index();
  if (i >= N * C) return;
  const int64_t n = i / C, c = i % C;
  float o = 0.f;
  for (int64_t k = 0; k < K; ++k) {
    const int32_t s = slot_of[n * K + k];
    if (s < 0) continue;
    o = __fmaf_rn(topk_w[n * K + k], y[static_cast<int64_t>(s) * C + c], o);
  }
  out[i] = o;
}

// dy row slot_of[n,k] += w * dout[n] (one fma on the CPU): each slot has one assignment, so one writer.
__global__ void combine_backward_dy_kernel(float* dy, const float* dout, const int32_t* slot_of,
                                           const float* topk_w, int64_t N, int64_t K, int64_t C) {
  const int64_t i = thread_index();
  if (i >= N * K * C) return;
  const int64_t nk = i / C, c = i % C;
  const int32_t s = slot_of[nk];
  if (s < 0) return;
  float* d = dy + static_cast<int64_t>(s) * C + c;
  *d = __fmaf_rn(topk_w[nk], dout[(nk / K) * C + c], *d);
}

// dtopk_w[n,k] += f32(dot(dout[n], y[slot])): one thread per assignment, the dot in double in c order
// (a fused multiply-add per term, as the CPU compiles it).
__global__ void combine_backward_dw_kernel(float* dtopk_w, const float* dout, const float* y,
                                           const int32_t* slot_of, int64_t N, int64_t K, int64_t C) {
  const int64_t nk = thread_index();
  if (nk >= N * K) return;
  const int32_t s = slot_of[nk];
  if (s < 0) return;
  const float* g = dout + (nk / K) * C;
  const float* ys = y + static_cast<int64_t>(s) * C;
  double dot = 0;
  for (int64_t c = 0; c < C; ++c) dot = __fma_rn(static_cast<double>(g[c]), static_cast<double>(ys[c]), dot);
  dtopk_w[nk] = __fadd_rn(dtopk_w[nk], __double2float_rn(dot));
}

// The stats' partial sums: per row (threads < N) its entropy -sum_e p ln p and lse^2, per expert
// (threads < E) its probability sum over rows in row order (the CPU's mean_p order exactly).
__global__ void router_stats_partials_kernel(double* row_entropy, double* row_z, double* expert_p,
                                             const float* probs, const float* lse, int64_t N, int64_t E) {
  const int64_t t = thread_index();
  if (t < N) {
    const float* p = probs + t * E;
    double h = 0;
    for (int64_t e = 0; e < E; ++e)
      if (p[e] > 0) h = __fma_rn(-static_cast<double>(p[e]), log(static_cast<double>(p[e])), h);
    row_entropy[t] = h;
    row_z[t] = __dmul_rn(static_cast<double>(lse[t]), static_cast<double>(lse[t]));
  }
  if (t < E) {
    double sum = 0;
    for (int64_t n = 0; n < N; ++n) sum = __dadd_rn(sum, static_cast<double>(probs[n * E + t]));
    expert_p[t] = sum;
  }
}

// The sum of x[0, n) in a fixed order: each thread its strided share, then thread 0 the shares in order.
__device__ double ordered_block_sum(const double* x, int64_t n, double* shares) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s = __dadd_rn(s, x[i]);
  shares[threadIdx.x] = s;
  __syncthreads();
  double total = 0;
  if (threadIdx.x == 0)
    for (unsigned t = 0; t < blockDim.x; ++t) total = __dadd_rn(total, shares[t]);
  __syncthreads();
  return total;  // thread 0's
}

// One block: the stats from the partials (the row sums in another order than the CPU's single loop,
// within the op's tolerance; the load-balancing term exactly as the CPU runs it).
__global__ void router_stats_finish_kernel(float* stats, const double* row_entropy, const double* row_z,
                                           const double* expert_p, const int32_t* routed, int64_t N, int64_t E) {
  __shared__ double shares[kThreads];
  const double entropy = ordered_block_sum(row_entropy, N, shares);
  const double z = ordered_block_sum(row_z, N, shares);
  if (threadIdx.x != 0) return;
  const double dn = static_cast<double>(N);
  double lb = 0;
  for (int64_t e = 0; e < E; ++e)
    lb = __fma_rn(__ddiv_rn(static_cast<double>(routed[e]), dn), __ddiv_rn(expert_p[e], dn), lb);
  stats[0] = __double2float_rn(__dmul_rn(lb, static_cast<double>(E)));
  stats[1] = __double2float_rn(__ddiv_rn(z, dn));
  stats[2] = __double2float_rn(__ddiv_rn(entropy, dn));
}

// d lb / d p[n,e] = E * routed_e / N^2 times the coefficients, as the CPU's product (left to right).
__device__ double aux_grad(const int32_t* routed, int64_t e, int64_t E, float aux_coef, float scale, double inv_n) {
  double a = __dmul_rn(static_cast<double>(scale), static_cast<double>(aux_coef));
  a = __dmul_rn(a, static_cast<double>(E));
  a = __dmul_rn(a, static_cast<double>(routed[e]));
  return __dmul_rn(__dmul_rn(a, inv_n), inv_n);
}

// One thread per token row. The CPU's dp vector (aux, plus each selected expert's share added in k
// order) is recomputed per expert rather than stored: the same operations in the same order.
__global__ void router_backward_kernel(float* dlogits, const float* dtopk_w, const float* probs, const float* lse,
                                       const int32_t* topk_idx, const float* topk_w, const int32_t* routed, int64_t N,
                                       int64_t E, int64_t K, float aux_coef, float z_coef, float scale) {
  const int64_t n = thread_index();
  if (n >= N) return;
  const double inv_n = __ddiv_rn(1.0, static_cast<double>(N));
  const float* p = probs + n * E;
  const int32_t* idx = topk_idx + n * K;
  const float* w = topk_w + n * K;
  const float* dw = dtopk_w + n * K;
  double s = 0, dw_dot_w = 0;
  for (int64_t k = 0; k < K; ++k) {
    s = __dadd_rn(s, static_cast<double>(p[idx[k]]));
    dw_dot_w = __fma_rn(static_cast<double>(dw[k]), static_cast<double>(w[k]), dw_dot_w);
  }
  auto dp = [&](int64_t e) {
    double d = aux_grad(routed, e, E, aux_coef, scale, inv_n);
    for (int64_t k = 0; k < K; ++k)
      if (idx[k] == e) d = __dadd_rn(d, __ddiv_rn(__dsub_rn(static_cast<double>(dw[k]), dw_dot_w), s));
    return d;
  };
  double p_dot_dp = 0;
  for (int64_t e = 0; e < E; ++e) p_dot_dp = __fma_rn(static_cast<double>(p[e]), dp(e), p_dot_dp);
  double zg = __dmul_rn(static_cast<double>(scale), static_cast<double>(z_coef));
  zg = __dmul_rn(__dmul_rn(__dmul_rn(zg, 2.0), static_cast<double>(lse[n])), inv_n);
  float* dl = dlogits + n * E;
  for (int64_t e = 0; e < E; ++e) {
    const double pe = static_cast<double>(p[e]);
    // The CPU rounds zg * p and fuses p * (dp - p_dot_dp) into the sum.
    const double g = __fma_rn(__dsub_rn(dp(e), p_dot_dp), pe, __dmul_rn(zg, pe));
    dl[e] = __fadd_rn(dl[e], __double2float_rn(g));
  }
}

}  // namespace

void moe_router_forward(Launch l, float* probs, float* lse, int32_t* topk_idx, float* topk_w, const float* logits,
                        int64_t N, int64_t E, int64_t K) {
  if (N <= 0 || E <= 0) return;
  router_forward_kernel<<<blocks_for(N, kThreads), kThreads, 0, l.stream>>>(probs, lse, topk_idx, topk_w, logits, N,
                                                                             E, K);
}

void moe_dispatch_plan(Launch l, int64_t* slot_token, int32_t* slot_of, int32_t* counts, int32_t* routed,
                       const int32_t* topk_idx, int64_t N, int64_t E, int64_t K, int64_t capacity) {
  if (E <= 0) return;
  // Every expert's routed and counts are written, zero when there is no assignment.
  routed_count_kernel<<<static_cast<unsigned>(E), kThreads, 0, l.stream>>>(routed, topk_idx,
                                                                           N > 0 && K > 0 ? N * K : 0);
  dispatch_kernel<<<static_cast<unsigned>(E), kThreads, 0, l.stream>>>(slot_token, slot_of, counts, routed, topk_idx,
                                                                       N, K, capacity);
}

void moe_combine_forward(Launch l, float* out, const float* y, const int32_t* slot_of, const float* topk_w, int64_t N,
                         int64_t K, int64_t C) {
  if (N <= 0 || C <= 0) return;
  combine_forward_kernel<<<blocks_for(N * C, kThreads), kThreads, 0, l.stream>>>(out, y, slot_of, topk_w, N, K, C);
}

void moe_combine_backward(Launch l, float* dy, float* dtopk_w, const float* dout, const float* y,
                          const int32_t* slot_of, const float* topk_w, int64_t N, int64_t K, int64_t C) {
  if (N <= 0 || K <= 0) return;
  if (C > 0)
    combine_backward_dy_kernel<<<blocks_for(N * K * C, kThreads), kThreads, 0, l.stream>>>(dy, dout, slot_of, topk_w,
                                                                                          N, K, C);
  combine_backward_dw_kernel<<<blocks_for(N * K, kThreads), kThreads, 0, l.stream>>>(dtopk_w, dout, y, slot_of, N, K,
                                                                                    C);
}

void moe_router_stats(Launch l, float* stats, const float* probs, const float* lse, const int32_t* routed, int64_t N,
                      int64_t E) {
  const int64_t rows = N > 0 ? N : 0, experts = E > 0 ? E : 0;
  auto* partials = static_cast<double*>(l.scratch->take(static_cast<size_t>(2 * rows + experts + 1) * sizeof(double)));
  double* row_entropy = partials;
  double* row_z = partials + rows;
  double* expert_p = partials + 2 * rows;
  const int64_t threads = rows > experts ? rows : experts;
  if (threads > 0)
    router_stats_partials_kernel<<<blocks_for(threads, kThreads), kThreads, 0, l.stream>>>(row_entropy, row_z,
                                                                                          expert_p, probs, lse, rows,
                                                                                          experts);
  // Written even for N == 0 (OVERWRITES stats), with the CPU's 0/0.
  router_stats_finish_kernel<<<1, kThreads, 0, l.stream>>>(stats, row_entropy, row_z, expert_p, routed, N, experts);
}

void moe_router_backward(Launch l, float* dlogits, const float* dtopk_w, const float* probs, const float* lse,
                         const int32_t* topk_idx, const float* topk_w, const int32_t* routed, int64_t N, int64_t E,
                         int64_t K, float aux_coef, float z_coef, float scale) {
  if (N <= 0 || E <= 0) return;
  router_backward_kernel<<<blocks_for(N, kThreads), kThreads, 0, l.stream>>>(
      dlogits, dtopk_w, probs, lse, topk_idx, topk_w, routed, N, E, K, aux_coef, z_coef, scale);
}

}  // namespace tessera::cuda
