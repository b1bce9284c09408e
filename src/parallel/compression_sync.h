// CompressedExchange: the data-parallel gradient exchange of one flat gradient buffer under
// comm.compression, through the real communicator (so traffic_bytes() counts compressed bytes):
//   bf16:     each bucket cast to bf16 and all-reduced (averaged) in bf16, cast back
//   topk:     each bucket's (index, value) pairs all-gathered, summed in rank order, / dp
//   onebit:   each bucket's packed signs + chunk scales all-gathered, summed in rank order, / dp
//   powersgd: at the end of the backward, one all-reduce of every matrix's P, orthonormalisation,
//             one all-reduce of every Q together with the vectors (biases, norms: uncompressed)
// topk, onebit and powersgd keep an error-feedback residual per element of the buffer (this rank's
// own, never communicated); bf16 is plain casting. Every replica computes the same result from the
// same received data in the same order, so the averaged gradients are bitwise identical.
// The residual and PowerSGD's warm-start Q are this rank's state between steps: state() lets a
// checkpoint save and restore them (train/compression_checkpoint.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "model/param_layout.h"
#include "parallel/compression.h"
#include "parallel/compression_powersgd.h"

namespace tessera {

class CompressedExchange {
 public:
  // `backend`, `dp` and `layout` outlive this object; cfg.kind != none. The loops run as ops of `backend`.
  CompressedExchange(Backend& backend, Communicator& dp, const ParamLayout& layout, const CompressionConfig& cfg);

  CompressionKind kind() const { return cfg_.kind; }
  // bf16, topk, onebit: buckets are exchanged as the backward makes them final (launch/complete);
  // powersgd: the whole buffer at once (exchange_all).
  bool per_bucket() const { return cfg_.kind != CompressionKind::powersgd; }

  // Compresses grads[begin, end) (bucket `bucket`) and starts its exchange.
  Work launch(size_t bucket, float* grads, int64_t begin, int64_t end);
  // After launch's Work completed: grads[begin, end) = average over the ranks of their decompressed buckets.
  void complete(size_t bucket, float* grads, int64_t begin, int64_t end);
  // powersgd: grads = the averaged PowerSGD approximation of every matrix, exact average of the rest.
  Status exchange_all(float* grads);

  // The error-feedback residual (numel of the buffer; empty for bf16).
  const std::vector<float>& residual() const { return residual_; }
  // The state a step leaves for the next (empty for bf16): "residual", and under PowerSGD
  // "powersgd_q/<parameter>" for each compressed matrix.
  std::vector<CompressionState> state();

 private:
  struct Matrix {
    std::string name;
    int64_t offset;
    std::unique_ptr<PowerSgd> psgd;
    int64_t p_at, q_at;  // into the P and Q exchange buffers
  };
  struct Vector {
    int64_t offset, numel, at;
  };
  Backend& backend_;
  Communicator& dp_;
  CompressionConfig cfg_;
  std::unique_ptr<Compressor> compressor_;  // bf16, topk, onebit
  std::vector<float> residual_;
  std::vector<std::vector<uint8_t>> send_, recv_;  // per bucket
  // powersgd
  std::vector<Matrix> matrices_;
  std::vector<Vector> vectors_;
  std::vector<float> p_buf_, q_buf_;  // all P's; all Q's followed by the vectors
};

}  // namespace tessera
