// The flat-span compressors: bf16 casting, top-k and 1-bit sign (error feedback in the caller's residual).
#include "parallel/compression.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
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
    order_.resize(static_cast<size_t>(n));
    std::iota(order_.begin(), order_.end(), 0);
    // Larger magnitude first; equal magnitudes by index, so the choice is a function of m alone.
    auto before = [m](int32_t a, int32_t b) {
      const float x = std::fabs(m[a]), y = std::fabs(m[b]);
      return x > y || (x == y && a < b);
    };
    std::nth_element(order_.begin(), order_.begin() + k, order_.end(), before);
    std::sort(order_.begin(), order_.begin() + k);
    auto* idx = reinterpret_cast<int32_t*>(payload);
    auto* val = reinterpret_cast<float*>(payload + 4 * k);
    std::copy_n(order_.begin(), k, idx);
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
  std::vector<int32_t> order_;  // scratch
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
    std::memset(words, 0, static_cast<size_t>((n + 31) / 32) * 4);
    for (int64_t c = 0; c < chunks(n); ++c) {
      const int64_t b = c * kOneBitChunk, e = std::min(n, b + kOneBitChunk);
      double sum = 0;
      for (int64_t i = b; i < e; ++i) sum += std::fabs(m[i]);
      const float s = static_cast<float>(sum / static_cast<double>(e - b));
      scales[c] = s;
      for (int64_t i = b; i < e; ++i) {
        const bool positive = !(m[i] < 0.0f);
        if (positive) words[i / 32] |= 1u << (i % 32);
        if (residual) residual[i] = m[i] - (positive ? s : -s);
      }
    }
  }
  void accumulate(const uint8_t* payload, int64_t n, float scale, float* out) const override {
    const auto* scales = reinterpret_cast<const float*>(payload);
    const auto* words = reinterpret_cast<const uint32_t*>(payload + 4 * chunks(n));
    for (int64_t c = 0; c < chunks(n); ++c) {
      const int64_t b = c * kOneBitChunk, e = std::min(n, b + kOneBitChunk);
      const float s = scale * scales[c];
      for (int64_t i = b; i < e; ++i) out[i] += (words[i / 32] >> (i % 32)) & 1u ? s : -s;
    }
  }
};

}  // namespace

// A compressor that brings its own CPU backend (see make_compressor(cfg)).
class OnOwnCpuBackend final : public Compressor {
 public:
  explicit OnOwnCpuBackend(const CompressionConfig& cfg) : Compressor(cpu_), inner_(make_compressor(cpu_, cfg)) {}
  CompressionKind kind() const override { return inner_->kind(); }
  int64_t payload_bytes(int64_t n) const override { return inner_->payload_bytes(n); }
  void compress(const float* grad, int64_t n, float* residual, uint8_t* payload) override {
    inner_->compress(grad, n, residual, payload);
  }
  void accumulate(const uint8_t* payload, int64_t n, float scale, float* out) const override {
    inner_->accumulate(payload, n, scale, out);
  }

 private:
  CpuBackend cpu_;  // stateless: the base may hold a reference before it is constructed
  std::unique_ptr<Compressor> inner_;
};

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

std::unique_ptr<Compressor> make_compressor(const CompressionConfig& cfg) {
  return std::make_unique<OnOwnCpuBackend>(cfg);
}

}  // namespace tessera
