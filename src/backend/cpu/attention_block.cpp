// Block-pair attention with a log-sum-exp merge (backend/ops.h: attention_block_*): per (batch, head)
// task, query tiles of kTile rows against the pair's visible keys, the score and probability blocks
// through sgemm (single-threaded inside the task loop), row sums and the merge weights in double.
#include "backend/ops.h"
#include "backend/cpu/sgemm_padded.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/log.h"

namespace tessera::ops {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

void check_dims(int64_t Tq, int64_t Tk, int64_t NH, int64_t NKV, int64_t HS, BlockMask mask) {
  TS_CHECK(NH > 0 && NKV > 0 && HS > 0 && NH % NKV == 0)
      << "attention_block needs NH a positive multiple of NKV and HS > 0, got NH=" << NH << " NKV=" << NKV
      << " HS=" << HS;
  TS_CHECK(mask != BlockMask::causal || Tq == Tk)
      << "attention_block: the causal mask is the diagonal pair and needs Tq == Tk, got Tq=" << Tq
      << " Tk=" << Tk;
}

// Keys [0, visible) are seen by query i: all of them, or 0..i on the diagonal.
int64_t visible_keys(int64_t i, int64_t Tk, BlockMask mask) { return mask == BlockMask::causal ? i + 1 : Tk; }

double dot(const float* a, const float* b, int64_t n) {
  double acc = 0.0;
  for (int64_t d = 0; d < n; ++d) acc += static_cast<double>(a[d]) * b[d];
  return acc;
}

// The scale of ops::attention_forward (a float), so both agree on the scores to the last bit of scale.
double attention_scale(int64_t HS) { return 1.0f / std::sqrt(static_cast<float>(HS)); }

}  // namespace

// Query rows per tile: bounds each task's score block to kTile x Tk floats.
constexpr int64_t kTile = 128;

void attention_block_forward(float* out, float* lse, const float* q, int64_t q_stride, const float* k,
                             const float* v, int64_t kv_stride, int64_t B, int64_t Tq, int64_t Tk, int64_t NH,
                             int64_t NKV, int64_t HS, BlockMask mask) {
  check_dims(Tq, Tk, NH, NKV, HS, mask);
  const int64_t group = NH / NKV, CO = NH * HS;
  const float scale = static_cast<float>(attention_scale(HS));

#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < B * NH; ++task) {
    const int64_t b = task / NH, h = task % NH, g = h / group;
    const float* kb = k + b * Tk * kv_stride + g * HS;
    const float* vb = v + b * Tk * kv_stride + g * HS;
    std::vector<float> s(static_cast<size_t>(std::min(kTile, Tq) * Tk)), o(static_cast<size_t>(std::min(kTile, Tq) * HS));
    for (int64_t i0 = 0; i0 < Tq; i0 += kTile) {
      const int64_t rows = std::min(kTile, Tq - i0);
      const int64_t nk = mask == BlockMask::causal ? i0 + rows : Tk;  // keys any row of the tile sees
      // s = scale * q k^T, then each row's probabilities relative to its own maximum.
      sgemm(false, true, rows, nk, HS, scale, q + (b * Tq + i0) * q_stride + h * HS, q_stride, kb, kv_stride, 0.0f,
            s.data(), nk);
      std::vector<double> row_lse(static_cast<size_t>(rows));
      std::vector<double> row_sum(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        float* sr = s.data() + r * nk;
        const int64_t visible = visible_keys(i0 + r, nk, mask);
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < visible; ++j) m = std::max(m, sr[j]);
        double sum = 0.0;
        for (int64_t j = 0; j < visible; ++j) {
          sr[j] = std::exp(sr[j] - m);
          sum += sr[j];
        }
        for (int64_t j = visible; j < nk; ++j) sr[j] = 0.0f;
        row_sum[r] = sum;
        row_lse[r] = m + std::log(sum);
      }
      sgemm(false, false, rows, HS, nk, 1.0f, s.data(), nk, vb, kv_stride, 0.0f, o.data(), HS);  // unnormalised
      // Merge: both parts are normalised softmax averages, weighted by their share of the total mass.
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        float* lse_i = lse + (b * NH + h) * Tq + i;
        const double lse_old = *lse_i, lse_blk = row_lse[r];
        const double lse_new = lse_old == kNegInf ? lse_blk
                                                  : std::max(lse_old, lse_blk) +
                                                        std::log1p(std::exp(-std::abs(lse_old - lse_blk)));
        const double w_old = std::exp(lse_old - lse_new);  // 0 on the first block (lse_old = -inf)
        const double w_blk = std::exp(lse_blk - lse_new) / row_sum[r];
        float* oi = out + (b * Tq + i) * CO + h * HS;
        const float* ob = o.data() + r * HS;
        for (int64_t d = 0; d < HS; ++d) oi[d] = static_cast<float>(w_old * oi[d] + w_blk * ob[d]);
        *lse_i = static_cast<float>(lse_new);
      }
    }
  }
}

void attention_block_delta(float* delta, const float* dout, const float* out, int64_t B, int64_t Tq, int64_t NH,
                           int64_t HS) {
  const int64_t CO = NH * HS;
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < B * NH; ++task) {
    const int64_t b = task / NH, h = task % NH;
    for (int64_t i = 0; i < Tq; ++i) {
      const int64_t at = (b * Tq + i) * CO + h * HS;
      delta[(b * NH + h) * Tq + i] = static_cast<float>(dot(dout + at, out + at, HS));
    }
  }
}

void attention_block_backward(float* dq, int64_t dq_stride, float* dk, float* dv, int64_t dkv_stride,
                              const float* dout, const float* q, int64_t q_stride, const float* k, const float* v,
                              int64_t kv_stride, const float* lse, const float* delta, int64_t B, int64_t Tq,
                              int64_t Tk, int64_t NH, int64_t NKV, int64_t HS, BlockMask mask) {
  check_dims(Tq, Tk, NH, NKV, HS, mask);
  const int64_t group = NH / NKV, CO = NH * HS;
  const float scale = static_cast<float>(attention_scale(HS));

  // One task per (b, kv head): it alone writes that head's dk/dv rows and its group's dq columns.
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < B * NKV; ++task) {
    const int64_t b = task / NKV, g = task % NKV;
    const float* kb = k + b * Tk * kv_stride + g * HS;
    const float* vb = v + b * Tk * kv_stride + g * HS;
    float* dkb = dk + b * Tk * dkv_stride + g * HS;
    float* dvb = dv + b * Tk * dkv_stride + g * HS;
    // Rows of P and dS are `ld` apart: never a multiple of 4 KiB, or the products reading them
    // transposed (dv, dk) run at 0.4x speed under oneDNN's AVX2 kernels (sgemm_padded.h).
    const size_t block = static_cast<size_t>(std::min(kTile, Tq) * (Tk + 16));  // unaliased_stride(nk) <= nk + 16
    std::vector<float> p(block), dp(block);
    for (int64_t h = g * group; h < (g + 1) * group; ++h)
      for (int64_t i0 = 0; i0 < Tq; i0 += kTile) {
        const int64_t rows = std::min(kTile, Tq - i0);
        const int64_t nk = mask == BlockMask::causal ? i0 + rows : Tk, ld = detail::unaliased_stride(nk);
        const float* qt = q + (b * Tq + i0) * q_stride + h * HS;
        const float* dot_ = dout + (b * Tq + i0) * CO + h * HS;
        // P = exp(scale q k^T - lse) (the final lse: this pair's slice of the whole softmax), dP = dout v^T.
        sgemm(false, true, rows, nk, HS, scale, qt, q_stride, kb, kv_stride, 0.0f, p.data(), ld);
        sgemm(false, true, rows, nk, HS, 1.0f, dot_, CO, vb, kv_stride, 0.0f, dp.data(), ld);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = i0 + r;
          const float lse_i = lse[(b * NH + h) * Tq + i], delta_i = delta[(b * NH + h) * Tq + i];
          const int64_t visible = visible_keys(i, nk, mask);
          float *pr = p.data() + r * ld, *dsr = dp.data() + r * ld;
          for (int64_t j = 0; j < visible; ++j) {
            pr[j] = std::exp(pr[j] - lse_i);
            dsr[j] = pr[j] * (dsr[j] - delta_i) * scale;  // dS, scale folded in once
          }
          for (int64_t j = visible; j < nk; ++j) pr[j] = dsr[j] = 0.0f;
        }
        sgemm(true, false, nk, HS, rows, 1.0f, p.data(), ld, dot_, CO, 1.0f, dvb, dkv_stride);     // dv += P^T dout
        sgemm(false, false, rows, HS, nk, 1.0f, dp.data(), ld, kb, kv_stride, 1.0f,                // dq += dS k
              dq + (b * Tq + i0) * dq_stride + h * HS, dq_stride);
        sgemm(true, false, nk, HS, rows, 1.0f, dp.data(), ld, qt, q_stride, 1.0f, dkb, dkv_stride);  // dk += dS^T q
      }
  }
}

}  // namespace tessera::ops
