// Naive double-precision causal attention for the tests: the full T x T masked softmax per
// (batch, head), its analytic gradient, and the scalar loss L = sum(out * R) for finite differences.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <vector>

namespace tessera::test {

struct AttnDims {
  int64_t B, T, NH, NKV, HS;
  int64_t c3() const { return (NH + 2 * NKV) * HS; }
  int64_t co() const { return NH * HS; }
  int64_t qkv_size() const { return B * T * c3(); }
  int64_t out_size() const { return B * T * co(); }
  int64_t lse_size() const { return B * NH * T; }
};
// Names a test case's shape in GoogleTest's output.
inline void PrintTo(const AttnDims& d, std::ostream* os) {
  *os << "B=" << d.B << " T=" << d.T << " NH=" << d.NH << " NKV=" << d.NKV << " HS=" << d.HS;
}

// Probabilities P(T,T) of head h in batch b; entries above the diagonal are exactly 0. lse(T) too.
inline void ref_probs(std::vector<double>& P, std::vector<double>& lse, const std::vector<double>& qkv,
                      const AttnDims& d, int64_t b, int64_t h) {
  const int64_t T = d.T, HS = d.HS, C3 = d.c3(), kvh = h / (d.NH / d.NKV);
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  P.assign(T * T, 0.0);
  lse.assign(T, 0.0);
  for (int64_t t = 0; t < T; ++t) {
    const double* q = &qkv[(b * T + t) * C3 + h * HS];
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < T; ++j) {
      if (j > t) continue;  // causal mask
      const double* k = &qkv[(b * T + j) * C3 + (d.NH + kvh) * HS];
      double s = 0;
      for (int64_t e = 0; e < HS; ++e) s += q[e] * k[e];
      P[t * T + j] = s * scale;
      mx = std::max(mx, s * scale);
    }
    double z = 0;
    for (int64_t j = 0; j <= t; ++j) z += std::exp(P[t * T + j] - mx);
    for (int64_t j = 0; j <= t; ++j) P[t * T + j] = std::exp(P[t * T + j] - mx) / z;
    lse[t] = mx + std::log(z);
  }
}

// out(B,T,NH*HS), lse(B,NH,T); batches outside [b_lo, b_hi) are left untouched.
inline void ref_forward(std::vector<double>& out, std::vector<double>& lse, const std::vector<double>& qkv,
                        const AttnDims& d, int64_t b_lo = 0, int64_t b_hi = -1) {
  if (b_hi < 0) b_hi = d.B;
  out.resize(d.out_size());
  lse.resize(d.lse_size());
  std::vector<double> P, l;
  const int64_t T = d.T, HS = d.HS, C3 = d.c3();
  for (int64_t b = b_lo; b < b_hi; ++b)
    for (int64_t h = 0; h < d.NH; ++h) {
      const int64_t kvh = h / (d.NH / d.NKV);
      ref_probs(P, l, qkv, d, b, h);
      for (int64_t t = 0; t < T; ++t) {
        lse[(b * d.NH + h) * T + t] = l[t];
        double* o = &out[(b * T + t) * d.co() + h * HS];
        std::fill(o, o + HS, 0.0);
        for (int64_t j = 0; j < T; ++j) {
          const double* v = &qkv[(b * T + j) * C3 + (d.NH + d.NKV + kvh) * HS];
          for (int64_t e = 0; e < HS; ++e) o[e] += P[t * T + j] * v[e];
        }
      }
    }
}

// dqkv = gradient of sum(out * dout) with respect to qkv (overwritten).
inline void ref_backward(std::vector<double>& dqkv, const std::vector<double>& dout, const std::vector<double>& qkv,
                         const AttnDims& d) {
  dqkv.assign(d.qkv_size(), 0.0);
  std::vector<double> P, l, dP;
  const int64_t T = d.T, HS = d.HS, C3 = d.c3();
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.NH; ++h) {
      const int64_t kvh = h / (d.NH / d.NKV);
      const int64_t qc = h * HS, kc = (d.NH + kvh) * HS, vc = (d.NH + d.NKV + kvh) * HS;
      ref_probs(P, l, qkv, d, b, h);
      dP.assign(T * T, 0.0);
      for (int64_t t = 0; t < T; ++t) {
        const double* g = &dout[(b * T + t) * d.co() + h * HS];
        double D = 0;
        for (int64_t j = 0; j <= t; ++j) {
          const double* v = &qkv[(b * T + j) * C3 + vc];
          double* dv = &dqkv[(b * T + j) * C3 + vc];
          double s = 0;
          for (int64_t e = 0; e < HS; ++e) {
            s += g[e] * v[e];
            dv[e] += P[t * T + j] * g[e];
          }
          dP[t * T + j] = s;
          D += P[t * T + j] * s;
        }
        for (int64_t j = 0; j <= t; ++j) {
          const double ds = P[t * T + j] * (dP[t * T + j] - D) * scale;
          const double* q = &qkv[(b * T + t) * C3 + qc];
          const double* k = &qkv[(b * T + j) * C3 + kc];
          double* dq = &dqkv[(b * T + t) * C3 + qc];
          double* dk = &dqkv[(b * T + j) * C3 + kc];
          for (int64_t e = 0; e < HS; ++e) {
            dq[e] += ds * k[e];
            dk[e] += ds * q[e];
          }
        }
      }
    }
}

// L = sum over batch b of out * R (the only batch a qkv entry of batch b affects).
inline double ref_loss_batch(const std::vector<double>& qkv, const std::vector<double>& R, const AttnDims& d,
                             int64_t b) {
  std::vector<double> out(d.out_size(), 0.0), lse;
  ref_forward(out, lse, qkv, d, b, b + 1);
  double L = 0;
  for (int64_t i = b * d.T * d.co(); i < (b + 1) * d.T * d.co(); ++i) L += out[i] * R[i];
  return L;
}

}  // namespace tessera::test
