// dtype names and IEEE half conversions.
#include "core/dtype.h"

#include <cmath>

namespace tessera {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::u16: return "u16";
    case DType::u8: return "u8";
  }
  return "?";
}

uint16_t f32_to_f16(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }
float f16_to_f32(uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }

}  // namespace tessera
