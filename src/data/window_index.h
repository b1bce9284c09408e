// The windows of a split: every shard cut into non-overlapping (T+1)-token windows at stride T
// (the partial tail dropped), numbered globally in shard order. Shared by the train and eval loaders.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/token_shard.h"

namespace tessera {

class WindowIndex {
 public:
  // `what` names the split in error messages (e.g. "train split of data/bible").
  static Result<WindowIndex> open(const std::vector<std::string>& shard_paths, int T, const std::string& what);
  uint64_t num_windows() const { return starts_.empty() ? 0 : starts_.back(); }
  uint64_t num_tokens() const { return tokens_; }
  int T() const { return T_; }
  // Copies window w's T+1 tokens into out.
  void read_window(uint64_t w, int32_t* out) const;

 private:
  std::vector<TokenShard> shards_;
  std::vector<uint64_t> starts_;  // starts_[i] = windows in shards before i; back() = total
  uint64_t tokens_ = 0;
  int T_ = 0;
};

// splitmix64: a tiny, well-mixed generator whose sequence is fixed forever (unlike std:: distributions).
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The window order of one epoch: a permutation of [0, n) that depends only on (seed, epoch, n).
std::vector<uint32_t> epoch_permutation(uint64_t n, uint64_t seed, uint64_t epoch);

}  // namespace tessera
