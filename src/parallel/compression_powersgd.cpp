// PowerSGD's local arithmetic: projection, orthonormalisation, factor and reconstruction (sgemm).
#include "parallel/compression_powersgd.h"

#include <cmath>

#include "core/log.h"
#include "core/rng.h"

namespace tessera {

bool PowerSgd::worthwhile(int64_t rows, int64_t cols, int rank) {
  return rows > 1 && cols > 1 && rank > 0 && rank * (rows + cols) < rows * cols;
}

PowerSgd::PowerSgd(Backend& backend, int64_t rows, int64_t cols, int rank, uint64_t seed)
    : Compressor(backend), rows_(rows), cols_(cols), rank_(rank), q_(static_cast<size_t>(cols * rank)) {
  TS_CHECK(rows > 0 && cols > 0 && rank > 0);
  Rng rng(seed);
  for (float& x : q_) x = rng.normal();
}

void PowerSgd::project(const float* grad, float* residual, float* p) const {
  const int64_t n = rows_ * cols_;
  backend_.add(residual, residual, grad, n);
  backend_.sgemm(false, false, rows_, rank_, cols_, 1.0f, residual, cols_, q_.data(), rank_, 0.0f, p, rank_);
}

void PowerSgd::factor(float* p, float* residual, float* q) const {
  backend_.orthonormalise_columns(p, rows_, rank_);
  backend_.sgemm(true, false, cols_, rank_, rows_, 1.0f, residual, cols_, p, rank_, 0.0f, q, rank_);
  backend_.sgemm(false, true, rows_, cols_, rank_, -1.0f, p, rank_, q, rank_, 1.0f, residual, cols_);
}

void PowerSgd::reconstruct(const float* p, const float* q, float* grad) {
  backend_.sgemm(false, true, rows_, cols_, rank_, 1.0f, p, rank_, q, rank_, 0.0f, grad, cols_);
  backend_.copy(q_.data(), q, q_numel());
}

int64_t PowerSgd::payload_bytes(int64_t n) const {
  TS_CHECK(n == rows_ * cols_);
  return 4 * (p_numel() + q_numel());
}

void PowerSgd::compress(const float* grad, int64_t n, float* residual, uint8_t* payload) {
  TS_CHECK(n == rows_ * cols_);
  if (!residual) {  // no error feedback: M = grad, in scratch
    scratch_.assign(static_cast<size_t>(n), 0.0f);
    residual = scratch_.data();
  }
  auto* p = reinterpret_cast<float*>(payload);
  float* q = p + p_numel();
  project(grad, residual, p);
  factor(p, residual, q);
  backend_.copy(q_.data(), q, q_numel());  // warm start from this rank's own Q
}

void PowerSgd::accumulate(const uint8_t* payload, int64_t n, float scale, float* out) const {
  TS_CHECK(n == rows_ * cols_);
  const auto* p = reinterpret_cast<const float*>(payload);
  backend_.sgemm(false, true, rows_, cols_, rank_, scale, p, rank_, p + p_numel(), rank_, 1.0f, out, cols_);
}

}  // namespace tessera
