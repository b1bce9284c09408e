// Random token ids for model tests: n ids in [0, V), the same for the same seed on every rank.
// Header-only; include as "../token_util.h".
#pragma once
#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace tessera::testing {

inline std::vector<int32_t> random_tokens(int64_t n, int64_t V, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng.next_u32() % V);
  return t;
}

}  // namespace tessera::testing
