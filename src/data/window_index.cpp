// Window numbering over shards and the per-epoch shuffle.
#include "data/window_index.h"

#include <algorithm>
#include <numeric>

#include "core/log.h"

namespace tessera {

Result<WindowIndex> WindowIndex::open(const std::vector<std::string>& shard_paths, int T, const std::string& what) {
  if (T < 1) return invalid_argument("sequence length T must be at least 1, got " + std::to_string(T));
  if (shard_paths.empty())
    return invalid_argument("the " + what + " has no shards; prepare it with `tessera prepare` (a val split needs a val fraction > 0)");
  WindowIndex ix;
  ix.T_ = T;
  ix.starts_.push_back(0);
  uint64_t largest = 0;
  for (const auto& p : shard_paths) {
    TS_ASSIGN_OR_RETURN(TokenShard s, TokenShard::open(p));
    const uint64_t n = s.size();
    largest = std::max(largest, n);
    ix.tokens_ += n;
    ix.starts_.push_back(ix.starts_.back() + (n >= static_cast<uint64_t>(T) + 1 ? (n - 1) / T : 0));
    ix.shards_.push_back(std::move(s));
  }
  if (ix.num_windows() == 0)
    return invalid_argument("the " + what + " has " + std::to_string(ix.tokens_) + " tokens (largest shard " +
                            std::to_string(largest) + "), fewer than one window of T+1 = " + std::to_string(T + 1) +
                            " tokens: use a shorter sequence length or more data");
  if (ix.num_windows() > UINT32_MAX)
    return invalid_argument("the " + what + " has " + std::to_string(ix.num_windows()) +
                            " windows, more than the loader's 2^32 limit: use a longer sequence length");
  return ix;
}

void WindowIndex::read_window(uint64_t w, int32_t* out) const {
  TS_CHECK(w < num_windows()) << "window " << w << " of " << num_windows();
  // The shard holding w: the last i with starts_[i] <= w.
  const size_t i = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), w) - starts_.begin()) - 1;
  const uint64_t k = w - starts_[i];
  shards_[i].copy_tokens(k * static_cast<uint64_t>(T_), static_cast<uint64_t>(T_) + 1, out);
}

std::vector<uint32_t> epoch_permutation(uint64_t n, uint64_t seed, uint64_t epoch) {
  std::vector<uint32_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0u);
  uint64_t state = seed ^ (epoch * 0xD1B54A32D192ED03ull);
  splitmix64(state);
  // Fisher-Yates; the multiply-shift range reduction is fixed arithmetic, so the order is stable.
  for (uint64_t i = n; i > 1; --i) {
    const uint64_t j = static_cast<uint64_t>((static_cast<unsigned __int128>(splitmix64(state)) * i) >> 64);
    std::swap(perm[i - 1], perm[j]);
  }
  return perm;
}

}  // namespace tessera
