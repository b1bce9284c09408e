// Mixture-of-experts routing on the CPU: the softmax top-k router, the dispatch plan (capacity
// dropping in a fixed priority order), the weighted combine and the router's losses and gradient.
// Everything runs in a fixed order (token rows in parallel, no cross-row reductions in floats).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/ops.h"

namespace tessera::ops {

void moe_router_forward(float* probs, float* lse, int32_t* topk_idx, float* topk_w, const float* logits, int64_t N,
                        int64_t E, int64_t K) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* z = logits + n * E;
    float* p = probs + n * E;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t e = 0; e < E; ++e) mx = std::max(mx, z[e]);
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += std::exp(static_cast<double>(z[e]) - mx);
    lse[n] = static_cast<float>(mx + std::log(sum));
    for (int64_t e = 0; e < E; ++e) p[e] = static_cast<float>(std::exp(static_cast<double>(z[e]) - mx) / sum);
    // Selection by repeated arg-max: strictly greater wins, so equal probabilities go to the lower index.
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
      sel += p[best];
    }
    for (int64_t k = 0; k < K; ++k) topk_w[n * K + k] = static_cast<float>(p[idx[k]] / sel);
  }
}

void moe_dispatch_plan(int64_t* slot_token, int32_t* slot_of, int32_t* counts, int32_t* routed,
                       const int32_t* topk_idx, int64_t N, int64_t E, int64_t K, int64_t capacity) {
  for (int64_t e = 0; e < E; ++e) routed[e] = counts[e] = 0;
  for (int64_t i = 0; i < N * K; ++i) ++routed[topk_idx[i]];
  // Slots of expert e start after the kept slots of experts < e.
  std::vector<int64_t> next(static_cast<size_t>(E));
  int64_t start = 0;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t kept = capacity > 0 ? std::min<int64_t>(routed[e], capacity) : routed[e];
    next[static_cast<size_t>(e)] = start;
    start += kept;
  }
  for (int64_t k = 0; k < K; ++k) {  // priority: choice rank first, then token order
    for (int64_t n = 0; n < N; ++n) {
      const int32_t e = topk_idx[n * K + k];
      if (capacity > 0 && counts[e] >= capacity) {
        slot_of[n * K + k] = -1;
        continue;
      }
      const int64_t s = next[static_cast<size_t>(e)]++;
      ++counts[e];
      slot_token[s] = n;
      slot_of[n * K + k] = static_cast<int32_t>(s);
    }
  }
}

void moe_combine_forward(float* out, const float* y, const int32_t* slot_of, const float* topk_w, int64_t N,
                         int64_t K, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* o = out + n * C;
    for (int64_t c = 0; c < C; ++c) o[c] = 0.f;
    for (int64_t k = 0; k < K; ++k) {
      const int32_t s = slot_of[n * K + k];
      if (s < 0) continue;
      const float w = topk_w[n * K + k];
      const float* ys = y + static_cast<int64_t>(s) * C;
      for (int64_t c = 0; c < C; ++c) o[c] += w * ys[c];
    }
  }
}

void moe_combine_backward(float* dy, float* dtopk_w, const float* dout, const float* y, const int32_t* slot_of,
                          const float* topk_w, int64_t N, int64_t K, int64_t C) {
  // Each slot belongs to exactly one assignment, so rows of dy are written by one token only.
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* g = dout + n * C;
    for (int64_t k = 0; k < K; ++k) {
      const int32_t s = slot_of[n * K + k];
      if (s < 0) continue;
      const float w = topk_w[n * K + k];
      const float* ys = y + static_cast<int64_t>(s) * C;
      float* d = dy + static_cast<int64_t>(s) * C;
      double dot = 0;
      for (int64_t c = 0; c < C; ++c) {
        d[c] += w * g[c];
        dot += static_cast<double>(g[c]) * ys[c];
      }
      dtopk_w[n * K + k] += static_cast<float>(dot);
    }
  }
}

void moe_router_stats(float* stats, const float* probs, const float* lse, const int32_t* routed, int64_t N,
                      int64_t E) {
  std::vector<double> mean_p(static_cast<size_t>(E), 0.0);
  double z = 0, entropy = 0;
  for (int64_t n = 0; n < N; ++n) {
    const float* p = probs + n * E;
    for (int64_t e = 0; e < E; ++e) {
      mean_p[static_cast<size_t>(e)] += p[e];
      if (p[e] > 0) entropy -= static_cast<double>(p[e]) * std::log(static_cast<double>(p[e]));
    }
    z += static_cast<double>(lse[n]) * lse[n];
  }
  double lb = 0;
  for (int64_t e = 0; e < E; ++e)
    lb += (static_cast<double>(routed[e]) / static_cast<double>(N)) * (mean_p[static_cast<size_t>(e)] / N);
  stats[0] = static_cast<float>(lb * static_cast<double>(E));
  stats[1] = static_cast<float>(z / static_cast<double>(N));
  stats[2] = static_cast<float>(entropy / static_cast<double>(N));
}

void moe_router_backward(float* dlogits, const float* dtopk_w, const float* probs, const float* lse,
                         const int32_t* topk_idx, const float* topk_w, const int32_t* routed, int64_t N, int64_t E,
                         int64_t K, float aux_coef, float z_coef, float scale) {
  const double inv_n = 1.0 / static_cast<double>(N);
  // d lb / d p[n,e] = E * routed_e / N^2 (routed held constant).
  std::vector<double> aux(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e)
    aux[static_cast<size_t>(e)] = static_cast<double>(scale) * aux_coef * static_cast<double>(E) * routed[e] * inv_n * inv_n;
#pragma omp parallel
  {
    std::vector<double> dp(static_cast<size_t>(E));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const float* p = probs + n * E;
      const int32_t* idx = topk_idx + n * K;
      const float* w = topk_w + n * K;
      const float* dw = dtopk_w + n * K;
      // Through the renormalisation w_k = p_{i_k} / s, s = sum_m p_{i_m}: d p_{i_k} = (dw_k - sum_m dw_m w_m) / s.
      double s = 0, dw_dot_w = 0;
      for (int64_t k = 0; k < K; ++k) {
        s += p[idx[k]];
        dw_dot_w += static_cast<double>(dw[k]) * w[k];
      }
      for (int64_t e = 0; e < E; ++e) dp[static_cast<size_t>(e)] = aux[static_cast<size_t>(e)];
      for (int64_t k = 0; k < K; ++k) dp[static_cast<size_t>(idx[k])] += (dw[k] - dw_dot_w) / s;
      // Softmax backward, plus the z-loss's d(lse^2)/dz_j = 2 lse p_j.
      double p_dot_dp = 0;
      for (int64_t e = 0; e < E; ++e) p_dot_dp += p[e] * dp[static_cast<size_t>(e)];
      const double zg = static_cast<double>(scale) * z_coef * 2.0 * lse[n] * inv_n;
      float* dl = dlogits + n * E;
      for (int64_t e = 0; e < E; ++e)
        dl[e] += static_cast<float>(p[e] * (dp[static_cast<size_t>(e)] - p_dot_dp) + zg * p[e]);
    }
  }
}

}  // namespace tessera::ops
