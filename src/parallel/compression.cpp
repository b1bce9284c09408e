// The flat-span compressors: bf16 casting, top-k and 1-bit sign (error feedback in the caller's residual).
#include "parallel/compression.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/log.h"

namespace tessera {

std::string_view compression_name(CompressionKind k) {
  switch (k) {
    case CompressionKind::none: return "none";
    case CompressionKind::bf16: return "bf16";
    case CompressionKind::topk: return "topk";
    case CompressionKind::powersgd: return "powersgd";
    case CompressionKind::onebit: return "onebit";
  }
  return "?";
}

Result<CompressionKind> parse_compression(std::string_view name) {
  for (CompressionKind k : {CompressionKind::none, CompressionKind::bf16, CompressionKind::topk,
                            CompressionKind::powersgd, CompressionKind::onebit})
    if (compression_name(k) == name) return k;
  return invalid_argument("unknown gradient compression \"" + std::string(name) +
                          "\": use \"none\", \"bf16\", \"topk\", \"powersgd\" or \"onebit\"");
}

int64_t topk_count(int64_t n, double ratio) {
  if (n <= 0) return 0;
  const auto k = static_cast<int64_t>(std::ceil(ratio * static_cast<double>(n)));
  return std::clamp<int64_t>(k, 1, n);
}

namespace {

// m = grad + residual, written into the residual (which then holds m until the compressor stores
// what it dropped), or grad itself without error feedback.
const float* add_residual(Backend& backend, const float* grad, int64_t n, float* residual) {
  if (!residual) return grad;
  backend.add(residual, residual, grad, n);
  return residual;
}

class Bf16Compressor final : public Compressor {
 public:
  using Compressor::Compressor;
  CompressionKind kind() const override { return CompressionKind::bf16; }
  int64_t payload_bytes(int64_t n) const override { return 2 * n; }
  void compress(const float* grad, int64_t n, float* residual, uint8_t* payload) override {
    const float* m = add_residual(backend_, grad, n, residual);
    auto* out = reinterpret_cast<uint16_t*>(payload);
    backend_.cast_f32_to_bf16(out, m, n);
    if (residual) backend_.sub_bf16(residual, m, out, n);
  }
  void accumulate(const uint8_t* payload, int64_t n, float scale, float* out) const override {
    backend_.accumulate_bf16(out, scale, reinterpret_cast<const uint16_t*>(payload), n);
  }
};

// Payload: k int32 indices (ascending), then k float values.
class TopKCompressor final : public Compressor {
 public:
  TopKCompressor(Backend& backend, double ratio) : Compressor(backend), ratio_(ratio) {}
  CompressionKind kind() const override { return CompressionKind::topk; }
  int64_t payload_bytes(int64_t n) const override { return topk_count(n, ratio_) * 8; }
  void compress(const float* grad, int64_t n, float* residual, uint8_t* payload) override {
    TS_CHECK(n < INT32_MAX);
    const float* m = add_residual(backend_, grad, n, residual);
    const int64_t k = topk_count(n, ratio_);
    if (order_.bytes() < static_cast<size_t>(n) * sizeof(int32_t))
      order_ = backend_.allocate(static_cast<size_t>(n) * sizeof(int32_t), MemCategory::communication);
    auto* idx = reinterpret_cast<int32_t*>(payload);
    auto* val = reinterpret_cast<float*>(payload + 4 * k);
    backend_.topk_select(idx, order_.as<int32_t>(), m, n, k);
    backend_.gather(val, m, idx, k);
    if (residual) backend_.scatter_fill(residual, idx, k, 0.0f);  // it holds m: what remains was dropped
  }
  void accumulate(const uint8_t* payload, int64_t n, float scale, float* out) const override {
    const int64_t k = topk_count(n, ratio_);
    const auto* idx = reinterpret_cast<const int32_t*>(payload);
    const auto* val = reinterpret_cast<const float*>(payload + 4 * k);
    backend_.scatter_add(out, scale, idx, val, k);
  }

 private:
  double ratio_;
  Buffer order_;  // the selection's scratch: n int32, grown as needed
};

// Payload: one float scale per chunk of kOneBitChunk elements, then the signs packed 32 to a word
// (bit set: +scale, clear: -scale).
class OneBitCompressor final : public Compressor {
 public:
  using Compressor::Compressor;
  CompressionKind kind() const override { return CompressionKind::onebit; }
  static int64_t chunks(int64_t n) { return (n + kOneBitChunk - 1) / kOneBitChunk; }
  int64_t payload_bytes(int64_t n) const override { return 4 * chunks(n) + 4 * ((n + 31) / 32); }
  void compress(const float* grad, int64_t n, float* residual, uint8_t* payload) override {
    const float* m = add_residual(backend_, grad, n, residual);
    auto* scales = reinterpret_cast<float*>(payload);
    auto* words = reinterpret_cast<uint32_t*>(payload + 4 * chunks(n));
    backend_.onebit_compress(scales, words, residual, m, n, kOneBitChunk);
  }
  void accumulate(const uint8_t* payload, int64_t n, float scale, float* out) const override {
    const auto* scales = reinterpret_cast<const float*>(payload);
    const auto* words = reinterpret_cast<const uint32_t*>(payload + 4 * chunks(n));
    backend_.onebit_accumulate(out, scale, scales, words, n, kOneBitChunk);
  }
};

}  // namespace

std::unique_ptr<Compressor> make_compressor(Backend& backend, const CompressionConfig& cfg) {
  switch (cfg.kind) {
    case CompressionKind::bf16: return std::make_unique<Bf16Compressor>(backend);
    case CompressionKind::topk: return std::make_unique<TopKCompressor>(backend, cfg.topk_ratio);
    case CompressionKind::onebit: return std::make_unique<OneBitCompressor>(backend);
    default: break;
  }
  TS_CHECK(false && "make_compressor: none and powersgd have no flat-span compressor");
  return nullptr;
}

}  // namespace tessera
