// Element types: f32 computes; bf16 and f16 are storage types (conversion helpers below) for
// mixed precision and communication later; integer types hold tokens.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tessera {

enum class DType { f32, bf16, f16, i32, u16, u8 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: case DType::f16: case DType::u16: return 2;
    case DType::u8: return 1;
  }
  return 0;
}
std::string_view dtype_name(DType t);

// bf16 with round-to-nearest-even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}
inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

}  // namespace tessera
