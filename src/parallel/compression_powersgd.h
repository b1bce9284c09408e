// PowerSGD (Vogels, Karimireddy, Jaggi 2019): a rank-r approximation of one matrix-shaped gradient
// by one step of subspace iteration, with error feedback and Q warm-started from the previous step.
//
// For M = grad + residual (rows x cols, row-major) and the state Q (cols x r):
//   P = M Q                 -> data parallel: all-reduce (average) P over the replicas
//   P = orthonormalise(P)   (Gram-Schmidt, in double)
//   Q = M^T P               local; residual = M - P Q^T (what this rank's message drops)
//                           -> data parallel: all-reduce (average) Q
//   grad = P Q^T            the decompressed average; Q is kept for the next step (warm start)
// Every replica must start from the same Q: it is seeded from `seed` alone. The approximation is
// the projection of M onto span(P): ||M - P Q^T||_F <= ||M||_F, and exact (to rounding) when
// rank(M) <= r. Bytes sent per step: 4 r (rows + cols) instead of 4 rows cols.
// A worker that sends one message (the parameter server) uses the Compressor interface: the
// payload is its own P and Q (no averaging of P), decompressed as P Q^T.
#pragma once
#include <cstdint>
#include <vector>

#include "parallel/compression.h"

namespace tessera {

class PowerSgd final : public Compressor {
 public:
  PowerSgd(Backend& backend, int64_t rows, int64_t cols, int rank, uint64_t seed);
  // Whether rank r saves bytes on a rows x cols matrix (r (rows + cols) < rows cols).
  static bool worthwhile(int64_t rows, int64_t cols, int rank);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int rank() const { return rank_; }
  int64_t p_numel() const { return rows_ * rank_; }
  int64_t q_numel() const { return cols_ * rank_; }
  // The warm-start state (cols x r); checkpoints save and restore it.
  const std::vector<float>& q() const { return q_; }
  std::vector<float>& q() { return q_; }

  // --- the two-round exchange (data parallel) ---
  // residual += grad (it now holds M); p (rows x r) = M Q.
  void project(const float* grad, float* residual, float* p) const;
  // p (the average over replicas) is orthonormalised in place; q (cols x r) = M^T p; residual = M - p q^T.
  void factor(float* p, float* residual, float* q) const;
  // grad = p q^T with q the average over replicas; q becomes the next step's warm start.
  void reconstruct(const float* p, const float* q, float* grad);

  // --- Compressor (one message: this rank's own P and Q); n must be rows * cols ---
  CompressionKind kind() const override { return CompressionKind::powersgd; }
  int64_t payload_bytes(int64_t n) const override;
  void compress(const float* grad, int64_t n, float* residual, uint8_t* payload) override;
  void accumulate(const uint8_t* payload, int64_t n, float scale, float* out) const override;

 private:
  int64_t rows_, cols_;
  int rank_;
  std::vector<float> q_;        // (cols, r)
  std::vector<float> scratch_;  // M when compress() is given no residual
};

}  // namespace tessera
