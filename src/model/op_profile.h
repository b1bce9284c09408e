// Optional per-kernel-group timing of the model's forward and backward (for benchmarks: where does
// the step time go?). Off unless enabled; when off it costs one branch per op.
#pragma once
#include <array>
#include <chrono>
#include <string_view>

namespace tessera {

enum class OpGroup { matmul, attention, norm, activation, embedding, loss, residual, count };
std::string_view op_group_name(OpGroup g);

struct OpProfile {
  bool enabled = false;
  std::array<double, static_cast<size_t>(OpGroup::count)> seconds{};
  void reset() { seconds.fill(0); }
};

// Times fn() into profile (if enabled).
template <typename Fn>
inline void profiled(OpProfile& profile, OpGroup g, Fn&& fn) {
  if (!profile.enabled) {
    fn();
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  profile.seconds[static_cast<size_t>(g)] +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace tessera
