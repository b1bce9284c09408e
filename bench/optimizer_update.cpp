// A data-parallel rank's update after the gradient exchange, two ways, interleaved in one run:
//   passes: divide the summed gradient by dp in place, its norm, scale it by the clipping factor in
//           place, AdamW (what DataParallel did until 2026-12-07);
//   folded: its norm, AdamW applying 1/dp x the clipping factor as it reads each gradient (now).
// Both leave the same parameters and moments (checked here, bitwise). Prints the median of each and
// their ratio; --json writes them.
// Usage: bench_optimizer_update [--params N (default 14.3M, bench-small)] [--dp D] [--reps R]
//                               [--threads T] [--json path]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "core/aligned_vector.h"
#include "bench_flags.h"
#include "timing.h"

namespace {

using namespace tessera;

using bench::median;
using bench::now_s;

using Floats = AlignedFloats;  // 64-byte aligned, as the trainer's parameters, gradients and moments

struct State {
  Floats params, grads, m, v;
  explicit State(int64_t n) : params(n, 0.5f), grads(n), m(n, 0.f), v(n, 0.f) {}
};

void fill_summed_gradient(Floats& g, int dp) {
  for (size_t i = 0; i < g.size(); ++i) g[i] = dp * 1e-3f * static_cast<float>((i * 2654435761u) % 2001) - dp;
}

constexpr float kMaxNorm = 1.0f;
constexpr float kLr = 1e-4f;

float clip_factor(double norm) { return norm > kMaxNorm ? static_cast<float>(kMaxNorm / (norm + 1e-6)) : 1.f; }

void update_in_passes(State& s, int dp, int64_t step) {
  const int64_t n = static_cast<int64_t>(s.grads.size());
  ops::scale_inplace(s.grads.data(), n, 1.f / static_cast<float>(dp));
  const float clip = clip_factor(std::sqrt(ops::sum_of_squares(s.grads.data(), n)));
  if (clip != 1.f) ops::scale_inplace(s.grads.data(), n, clip);
  ops::adamw_update(s.params.data(), s.grads.data(), s.m.data(), s.v.data(), n, kLr, 0.9f, 0.95f, 1e-8f, 0.1f, step, 1.f);
}

void update_folded(State& s, int dp, int64_t step) {
  const int64_t n = static_cast<int64_t>(s.grads.size());
  const double inv = 1.0 / dp;
  const float scale = 1.f / static_cast<float>(dp);
  const float clip = clip_factor(std::sqrt(ops::sum_of_squares(s.grads.data(), n) * inv * inv));
  ops::adamw_update(s.params.data(), s.grads.data(), s.m.data(), s.v.data(), n, kLr, 0.9f, 0.95f, 1e-8f, 0.1f, step,
                    scale * clip);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t params = 14'300'000;
  int dp = 2, reps = 9, threads = 1;
  std::string json, cpu_isa = "auto";
  const bench::Flags flags =
      bench::Flags("bench_optimizer_update", "A data-parallel rank's update after the exchange: separate passes against one folded pass.")
          .option("--params", &params, "parameters (14.3M: bench-small)")
          .option("--dp", &dp, "data-parallel ranks the summed gradient came from")
          .option("--reps", &reps, "timed pairs (medians)")
          .option("--threads", &threads, "OpenMP threads")
          .cpu_isa(&cpu_isa)
          .option("--json", &json, "write the results here");
  if (const auto exit_code = flags.parse(argc, argv)) return *exit_code;
  if (params < 1 || dp < 1 || reps < 1 || threads < 1) {
    std::fprintf(stderr, "bench_optimizer_update: --params, --dp, --reps and --threads must be at least 1\n%s",
                 flags.usage().c_str());
    return 2;
  }
  omp_set_num_threads(threads);
  State passes(params), folded(params);
  std::vector<double> t_passes, t_folded;
  for (int r = 0; r < reps + 1; ++r) {  // the first pair warms up
    fill_summed_gradient(passes.grads, dp);
    fill_summed_gradient(folded.grads, dp);
    double t0 = now_s();
    update_in_passes(passes, dp, r + 1);
    const double a = now_s() - t0;
    t0 = now_s();
    update_folded(folded, dp, r + 1);
    const double b = now_s() - t0;
    if (r > 0) t_passes.push_back(a), t_folded.push_back(b);
  }
  const bool same = std::memcmp(passes.params.data(), folded.params.data(), params * sizeof(float)) == 0 &&
                    std::memcmp(passes.m.data(), folded.m.data(), params * sizeof(float)) == 0 &&
                    std::memcmp(passes.v.data(), folded.v.data(), params * sizeof(float)) == 0;
  const double mp = median(t_passes) * 1e3, mf = median(t_folded) * 1e3;
  std::printf("%lld parameters, dp %d, %d thread(s), median of %d: passes %.2f ms, folded %.2f ms (%.2fx); "
              "parameters and moments %s\n",
              static_cast<long long>(params), dp, threads, reps, mp, mf, mp / mf, same ? "bitwise equal" : "DIFFER");
  if (!json.empty()) {
    std::ofstream f(json);
    f << "{\"params\": " << params << ", \"dp\": " << dp << ", \"threads\": " << threads << ", \"reps\": " << reps
      << ", \"passes_ms\": " << mp << ", \"folded_ms\": " << mf << ", \"bitwise_equal\": " << (same ? "true" : "false")
      << "}\n";
  }
  return same || (dp & (dp - 1)) != 0 ? 0 : 1;  // a power-of-two dp must give the same bits
}
