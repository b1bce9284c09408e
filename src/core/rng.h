// Deterministic random numbers (xorshift64* + Box-Muller), with state that can be saved and
// restored exactly for resumable runs.
#pragma once
#include <cstdint>

namespace tessera {

class Rng {
 public:
  explicit Rng(uint64_t seed = 1) { reseed(seed); }
  void reseed(uint64_t seed) { state_ = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull; if (!state_) state_ = 1; }
  uint64_t next_u64() {
    state_ ^= state_ >> 12; state_ ^= state_ << 25; state_ ^= state_ >> 27;
    return state_ * 0x2545F4914F6CDD1Dull;
  }
  uint32_t next_u32() { return static_cast<uint32_t>(next_u64() >> 32); }
  // Uniform in [0, 1).
  float uniform() { return static_cast<float>(next_u64() >> 40) / 16777216.0f; }
  double uniform_double() { return static_cast<double>(next_u64() >> 11) / 9007199254740992.0; }
  float normal(float mean = 0.f, float stddev = 1.f);
  uint64_t state() const { return state_; }
  void set_state(uint64_t s) { state_ = s; }

 private:
  uint64_t state_;
};

}  // namespace tessera
