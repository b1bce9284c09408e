// Gradient compressors (comm.compression): bf16 casting, top-k and 1-bit sign with error feedback,
// and PowerSGD (compression_powersgd.h). Pure local arithmetic, no communication: the data-parallel
// exchange (compression_sync.h) and the parameter server move the payloads.
//
// Use (one message per worker, e.g. a parameter-server push):
//   auto c = make_compressor(backend, cfg);             // bf16, topk or onebit
//   std::vector<uint8_t> wire(c->payload_bytes(n));     // the same size on every rank
//   c->compress(grad, n, residual, wire.data());        // residual: n floats, zero at the start, kept by the caller
//   ... send wire; the receiver, for each worker's payload:
//   c->accumulate(payload, n, 1.0f / workers, sum);     // sum[i] += scale * decompressed[i]
//
// Error feedback (Seide et al. 2014; Karimireddy et al. 2019): the compressor compresses
// m = grad + residual and leaves in the residual exactly what it dropped, m - decompress(payload),
// so that later steps send it. `residual` may be nullptr: then m = grad and nothing is carried.
// Identity (tested): decompress(payload) + new residual == grad + old residual, where the right side
// is the float sum; bitwise for top-k, to one float rounding of the subtraction for the others.
//
// Documented error of one compress (m = grad + residual, d = decompress(payload)):
//   bf16:   |d_i - m_i| <= 2^-8 |m_i| (round to nearest even; finite, normal values)
//   topk:   d keeps the k = max(1, ceil(ratio n)) largest |m_i| exactly (ties: lower index first) and
//           zeroes the rest, so ||m - d||^2 = sum of the n - k smallest m_i^2 <= (1 - k/n) ||m||^2
//   onebit: per chunk of kOneBitChunk elements d_i = s sign(m_i) with s = mean |m_i| over the chunk
//           (sign(0) = +), so ||m - d||^2 = ||m||^2 - n_chunk s^2 per chunk (<= ||m||^2)
//   powersgd: d = P P^T m for an orthonormal P (rows x r): ||m - d||_F <= ||m||_F, and d == m up to
//           rounding when rank(m) <= r
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "backend/backend.h"
#include "core/status.h"

namespace tessera {

enum class CompressionKind : uint8_t { none, bf16, topk, powersgd, onebit };
std::string_view compression_name(CompressionKind k);
// "none", "bf16", "topk", "powersgd" or "onebit"; anything else is an error naming the choices.
Result<CompressionKind> parse_compression(std::string_view name);

struct CompressionConfig {
  CompressionKind kind = CompressionKind::none;
  double topk_ratio = 0.01;  // fraction of the elements top-k keeps, in (0, 1]
  int powersgd_rank = 4;     // r of PowerSGD's P (rows x r) and Q (cols x r)
};

// State a compressing exchange carries between steps (an error-feedback residual, PowerSGD's Q),
// named for checkpoints (train/compression_checkpoint.h).
struct CompressionState {
  std::string name;
  float* data;
  int64_t numel;
};

// Elements that share one 1-bit scale.
inline constexpr int64_t kOneBitChunk = 1024;

// A compressor of flat float spans (bf16, topk, onebit). Holds only scratch space: the state that
// carries between steps (the residual) belongs to the caller, one per gradient span. Its loops run
// as ops of `backend`, whose memory the spans are.
class Compressor {
 public:
  explicit Compressor(Backend& backend) : backend_(backend) {}
  virtual ~Compressor() = default;
  virtual CompressionKind kind() const = 0;
  // Bytes of the payload of an n-element span: a function of n and the config only, so every rank
  // sends blocks of the same size (all-gathers need that).
  virtual int64_t payload_bytes(int64_t n) const = 0;
  // Compresses grad[0, n) + residual[0, n) into payload[0, payload_bytes(n)); residual (n floats or
  // nullptr) becomes what was dropped. grad is not modified.
  virtual void compress(const float* grad, int64_t n, float* residual, uint8_t* payload) = 0;
  // out[i] += scale * decompress(payload)[i] for i < n.
  virtual void accumulate(const uint8_t* payload, int64_t n, float scale, float* out) const = 0;

 protected:
  Backend& backend_;
};

// bf16, topk or onebit (CHECKs otherwise: PowerSGD needs a matrix shape, see PowerSgd).
std::unique_ptr<Compressor> make_compressor(Backend& backend, const CompressionConfig& cfg);

// The k top-k keeps of n elements.
int64_t topk_count(int64_t n, double ratio);

}  // namespace tessera
