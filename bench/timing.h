// Timing helpers shared by the benchmarks: a monotonic clock in seconds and the median of samples.
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

namespace tessera::bench {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The middle sample (the upper one of an even count); 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace tessera::bench
