// Block-pair attention with a log-sum-exp merge (backend/ops.h: attention_block_*): one query row at a time, scores,
// probabilities and sums in double. Chunks are short (a sequence divided by the ring size), so plain
// loops suffice here; a tiled kernel can replace these bodies without changing the contract.
#include "backend/ops.h"

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

void attention_block_forward(float* out, float* lse, const float* q, int64_t q_stride, const float* k,
                             const float* v, int64_t kv_stride, int64_t B, int64_t Tq, int64_t Tk, int64_t NH,
                             int64_t NKV, int64_t HS, BlockMask mask) {
  check_dims(Tq, Tk, NH, NKV, HS, mask);
  const int64_t group = NH / NKV, CO = NH * HS;
  const double scale = attention_scale(HS);

#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < B * NH; ++task) {
    const int64_t b = task / NH, h = task % NH, g = h / group;
    std::vector<double> s(Tk), o(HS);
    for (int64_t i = 0; i < Tq; ++i) {
      const int64_t nk = visible_keys(i, Tk, mask);
      if (nk <= 0) continue;  // nothing visible: this block adds nothing (and exp(-inf - -inf) is NaN)
      const float* qi = q + (b * Tq + i) * q_stride + h * HS;
      double m = kNegInf;
      for (int64_t j = 0; j < nk; ++j) {
        s[j] = scale * dot(qi, k + (b * Tk + j) * kv_stride + g * HS, HS);
        m = std::max(m, s[j]);
      }
      double sum = 0.0;
      std::fill(o.begin(), o.end(), 0.0);
      for (int64_t j = 0; j < nk; ++j) {
        const double p = std::exp(s[j] - m);
        sum += p;
        const float* vj = v + (b * Tk + j) * kv_stride + g * HS;
        for (int64_t d = 0; d < HS; ++d) o[d] += p * vj[d];
      }
      const double lse_blk = m + std::log(sum);

      // Merge: both parts are normalised softmax averages, weighted by their share of the total mass.
      float* lse_i = lse + (b * NH + h) * Tq + i;
      const double lse_old = *lse_i;
      const double lse_new = lse_old == kNegInf ? lse_blk
                                                : std::max(lse_old, lse_blk) +
                                                      std::log1p(std::exp(-std::abs(lse_old - lse_blk)));
      const double w_old = std::exp(lse_old - lse_new);  // 0 on the first block (lse_old = -inf)
      const double w_blk = std::exp(lse_blk - lse_new) / sum;
      float* oi = out + (b * Tq + i) * CO + h * HS;
      for (int64_t d = 0; d < HS; ++d) oi[d] = static_cast<float>(w_old * oi[d] + w_blk * o[d]);
      *lse_i = static_cast<float>(lse_new);
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
  const double scale = attention_scale(HS);

  // One task per (b, kv head): it alone writes that head's dk/dv rows and its group's dq columns.
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < B * NKV; ++task) {
    const int64_t b = task / NKV, g = task % NKV;
    std::vector<double> dk_acc(Tk * HS, 0.0), dv_acc(Tk * HS, 0.0), dq_acc(HS);
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t nk = visible_keys(i, Tk, mask);
        const float* qi = q + (b * Tq + i) * q_stride + h * HS;
        const float* doi = dout + (b * Tq + i) * CO + h * HS;
        const double lse_i = lse[(b * NH + h) * Tq + i];
        const double delta_i = delta[(b * NH + h) * Tq + i];
        std::fill(dq_acc.begin(), dq_acc.end(), 0.0);
        for (int64_t j = 0; j < nk; ++j) {
          const float* kj = k + (b * Tk + j) * kv_stride + g * HS;
          const float* vj = v + (b * Tk + j) * kv_stride + g * HS;
          const double p = std::exp(scale * dot(qi, kj, HS) - lse_i);
          const double ds = p * (dot(doi, vj, HS) - delta_i) * scale;  // scale folded in once
          double* dkj = dk_acc.data() + j * HS;
          double* dvj = dv_acc.data() + j * HS;
          for (int64_t d = 0; d < HS; ++d) {
            dvj[d] += p * doi[d];
            dkj[d] += ds * qi[d];
            dq_acc[d] += ds * kj[d];
          }
        }
        float* dqi = dq + (b * Tq + i) * dq_stride + h * HS;
        for (int64_t d = 0; d < HS; ++d) dqi[d] += static_cast<float>(dq_acc[d]);
      }
    }
    for (int64_t j = 0; j < Tk; ++j) {
      float* dkj = dk + (b * Tk + j) * dkv_stride + g * HS;
      float* dvj = dv + (b * Tk + j) * dkv_stride + g * HS;
      for (int64_t d = 0; d < HS; ++d) {
        dkj[d] += static_cast<float>(dk_acc[j * HS + d]);
        dvj[d] += static_cast<float>(dv_acc[j * HS + d]);
      }
    }
  }
}

}  // namespace tessera::ops
