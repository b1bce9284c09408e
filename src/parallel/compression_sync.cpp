// The compressed data-parallel gradient exchange: per-bucket bf16 / top-k / 1-bit, whole-buffer PowerSGD.
#include "parallel/compression_sync.h"

#include <algorithm>
#include <cstring>

#include "core/dtype.h"
#include "core/log.h"

namespace tessera {

CompressedExchange::CompressedExchange(Backend& backend, Communicator& dp, const ParamLayout& layout,
                                       const CompressionConfig& cfg)
    : backend_(backend), dp_(dp), cfg_(cfg) {
  TS_CHECK(cfg.kind != CompressionKind::none);
  if (cfg.kind != CompressionKind::bf16) residual_.assign(static_cast<size_t>(layout.total_numel()), 0.0f);
  if (per_bucket()) {
    compressor_ = make_compressor(backend, cfg);
    return;
  }
  int64_t p_total = 0, q_total = 0;
  uint64_t index = 0;
  for (const ParamInfo& p : layout.params()) {
    ++index;
    const bool matrix = p.shape.size() == 2 && PowerSgd::worthwhile(p.shape[0], p.shape[1], cfg.powersgd_rank);
    if (!matrix) {
      vectors_.push_back({p.offset, p.numel, 0});
      continue;
    }
    // The same seed on every replica of this chunk: the replicas' Q must start equal.
    auto psgd = std::make_unique<PowerSgd>(backend, p.shape[0], p.shape[1], cfg.powersgd_rank, 0x5EED0000ull + index);
    matrices_.push_back({p.name, p.offset, std::move(psgd), p_total, q_total});
    p_total += matrices_.back().psgd->p_numel();
    q_total += matrices_.back().psgd->q_numel();
  }
  for (Vector& v : vectors_) {  // the vectors ride along with the Q's, uncompressed
    v.at = q_total;
    q_total += v.numel;
  }
  p_buf_.assign(static_cast<size_t>(p_total), 0.0f);
  q_buf_.assign(static_cast<size_t>(q_total), 0.0f);
}

std::vector<CompressionState> CompressedExchange::state() {
  std::vector<CompressionState> out;
  if (!residual_.empty()) out.push_back({"residual", residual_.data(), static_cast<int64_t>(residual_.size())});
  for (Matrix& m : matrices_) {
    std::vector<float>& q = m.psgd->q();
    out.push_back({"powersgd_q/" + m.name, q.data(), static_cast<int64_t>(q.size())});
  }
  return out;
}

Work CompressedExchange::launch(size_t bucket, float* grads, int64_t begin, int64_t end) {
  TS_CHECK(per_bucket());
  if (send_.size() <= bucket) {
    send_.resize(bucket + 1);
    recv_.resize(bucket + 1);
  }
  const int64_t n = end - begin, bytes = compressor_->payload_bytes(n);
  std::vector<uint8_t>& send = send_[bucket];
  send.resize(static_cast<size_t>(bytes));
  float* residual = residual_.empty() ? nullptr : residual_.data() + begin;
  compressor_->compress(grads + begin, n, residual, send.data());
  if (cfg_.kind == CompressionKind::bf16)  // bf16 reduces natively: no need to gather every rank's copy
    return dp_.all_reduce_async(send.data(), send.data(), n, DType::bf16, ReduceOp::avg);
  std::vector<uint8_t>& recv = recv_[bucket];
  recv.resize(static_cast<size_t>(bytes * dp_.size()));
  return dp_.all_gather_async(send.data(), recv.data(), bytes, DType::u8);
}

void CompressedExchange::complete(size_t bucket, float* grads, int64_t begin, int64_t end) {
  const int64_t n = end - begin;
  float* g = grads + begin;
  backend_.fill(g, n, 0.0f);
  if (cfg_.kind == CompressionKind::bf16) {
    compressor_->accumulate(send_[bucket].data(), n, 1.0f, g);
    return;
  }
  // The same sums in the same (rank) order on every replica: bitwise-identical results.
  const int64_t bytes = compressor_->payload_bytes(n);
  for (int r = 0; r < dp_.size(); ++r) compressor_->accumulate(recv_[bucket].data() + r * bytes, n, 1.0f, g);
  backend_.scale_inplace(g, n, 1.0f / static_cast<float>(dp_.size()));
}

Status CompressedExchange::exchange_all(float* grads) {
  TS_CHECK(!per_bucket());
  float* residual = residual_.data();
  for (Matrix& m : matrices_) m.psgd->project(grads + m.offset, residual + m.offset, p_buf_.data() + m.p_at);
  if (!p_buf_.empty()) {
    const Status s = dp_.all_reduce_async(p_buf_.data(), p_buf_.data(), static_cast<int64_t>(p_buf_.size()),
                                          DType::f32, ReduceOp::avg).wait();
    if (!s.ok()) return Status(s.code(), "PowerSGD exchange of P: " + s.message());
  }
  for (Matrix& m : matrices_) m.psgd->factor(p_buf_.data() + m.p_at, residual + m.offset, q_buf_.data() + m.q_at);
  for (const Vector& v : vectors_) backend_.copy(q_buf_.data() + v.at, grads + v.offset, v.numel);
  const Status s = dp_.all_reduce_async(q_buf_.data(), q_buf_.data(), static_cast<int64_t>(q_buf_.size()),
                                        DType::f32, ReduceOp::avg).wait();
  if (!s.ok()) return Status(s.code(), "PowerSGD exchange of Q: " + s.message());
  for (Matrix& m : matrices_) m.psgd->reconstruct(p_buf_.data() + m.p_at, q_buf_.data() + m.q_at, grads + m.offset);
  for (const Vector& v : vectors_) backend_.copy(grads + v.offset, q_buf_.data() + v.at, v.numel);
  return Status::ok_status();
}

}  // namespace tessera
