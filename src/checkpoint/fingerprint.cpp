// The fingerprint sum of fingerprint.h. Each term is one 32x32->64-bit product of two keyed views
// of the element, the same kind of step xxh3 is built from, so the loop vectorizes (pmuludq).
#include "checkpoint/fingerprint.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace tessera::checkpoint {
namespace {

constexpr uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

uint64_t mix64(uint64_t x) {  // murmur3's finalizer: a salt per 2^32-element segment
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

// Elements [first, first + n) where first's low 32 bits do not wrap within the run: the position
// enters each term through its low 32 bits (cheap in vector lanes) and the high bits through salts.
template <typename Elem>
uint64_t segment_sum(const unsigned char* data, uint64_t first, int64_t n) {
  const uint64_t salt = mix64((first >> 32) + 0x165667b19e3779f9ull);
  const uint32_t s1 = 0x85ebca77u ^ static_cast<uint32_t>(salt), s2 = 0x27d4eb2fu ^ static_cast<uint32_t>(salt >> 32);
  const uint32_t i0 = static_cast<uint32_t>(first);
  // The keys of element i are i * K + s (mod 2^32), stepped by additions rather than multiplied out.
  constexpr uint32_t K1 = 0x9e3779b1u, K2 = 0xc2b2ae3du;
  uint32_t k1 = i0 * K1 + s1, k2 = i0 * K2 + s2;
  uint64_t sum = 0;
  for (int64_t k = 0; k < n; ++k) {
    Elem e;  // memcpy: the bytes may be a file buffer, not an Elem array (no aliasing questions)
    std::memcpy(&e, data + k * static_cast<int64_t>(sizeof(Elem)), sizeof e);
    const uint32_t x = e;
    const uint32_t a = x ^ k1;
    const uint32_t b = rotl32(x, 16) ^ k2;
    sum += static_cast<uint64_t>(a) * b;
    k1 += K1;
    k2 += K2;
  }
  return sum;
}

template <typename Elem>
uint64_t typed_sum(const void* data, int64_t global_offset, int64_t numel) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t first = static_cast<uint64_t>(global_offset), sum = 0;
  while (numel > 0) {
    const uint64_t to_wrap = (uint64_t{1} << 32) - (first & 0xffffffffu);
    const int64_t n = static_cast<int64_t>(std::min<uint64_t>(to_wrap, static_cast<uint64_t>(numel)));
    sum += segment_sum<Elem>(p, first, n);
    p += n * static_cast<int64_t>(sizeof(Elem));
    first += static_cast<uint64_t>(n);
    numel -= n;
  }
  return sum;
}

}  // namespace

uint64_t fingerprint_elements(DType dtype, int64_t global_offset, int64_t numel, const void* data) {
  switch (dtype_size(dtype)) {
    case 4: return typed_sum<uint32_t>(data, global_offset, numel);
    case 2: return typed_sum<uint16_t>(data, global_offset, numel);
    default: return typed_sum<uint8_t>(data, global_offset, numel);
  }
}

uint64_t state_fingerprint(const nlohmann::json& state) {
  const std::string text = state.dump();
  return XXH64(text.data(), text.size(), 0);
}

std::string fingerprint_hex(uint64_t fingerprint) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(fingerprint));
  return buf;
}

bool parse_fingerprint_hex(std::string_view text, uint64_t* fingerprint) {
  if (text.size() != 16) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *fingerprint, 16);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace tessera::checkpoint
