// The linear layers' matmuls whose transposed operand has rows a multiple of 4 KiB apart, two ways,
// interleaved in one run: oneDNN's sgemm on the operands as they are (ops::sgemm) and a CpuBackend's
// sgemm, which copies such an operand into padded rows where that is faster (sgemm_padded.h). Checks
// that both give the same bits; prints the median time of each and their ratio; --json writes them.
// Shapes: the weight gradients (A^T B) and forwards (A B^T) of the layers whose width makes rows
// 4 KiB apart in bench-tiny (2048 tokens), the default job's kjv-bpe (4096 tokens, its 4096-word head)
// and GPT-2 (1024 tokens).
// Usage: bench_sgemm_padded [--cpu-isa auto|avx2|avx512|avx512_bf16] [--reps R] [--threads T] [--json path]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/sgemm_padded.h"
#include "backend/cpu_isa.h"
#include "backend/ops.h"
#include "bench_flags.h"
#include "timing.h"

namespace {

using namespace tessera;

using bench::median;
using bench::now_s;

struct PaddedCase {
  const char* what;
  bool ta, tb;
  int64_t M, N, K;
};

constexpr PaddedCase kShapes[] = {
    {"bench-tiny fc weight grad", true, false, 1024, 256, 2048},
    {"bench-tiny proj weight grad", true, false, 256, 1024, 2048},
    {"bench-tiny proj forward", false, true, 2048, 256, 1024},
    {"kjv-bpe fc weight grad", true, false, 1024, 256, 4096},
    {"kjv-bpe head weight grad", true, false, 4096, 256, 4096},
    {"kjv-bpe proj forward", false, true, 4096, 256, 1024},
    {"gpt2 fc weight grad", true, false, 3072, 768, 1024},
    {"gpt2 proj forward", false, true, 1024, 768, 3072},
};

std::vector<float> pseudo_random(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(((i + seed) * 2654435761u) % 2001) * 1e-3f - 1.0f;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cpu_isa = "auto", json_path;
  int reps = 7, threads = 0;
  const bench::Flags flags =
      bench::Flags("bench_sgemm_padded", "The matmuls whose transposed operand aliases, plain sgemm against the backend's.")
          .cpu_isa(&cpu_isa)
          .option("--reps", &reps, "timed calls of each (medians)")
          .option("--threads", &threads, "OpenMP threads (0: OpenMP's default)")
          .option("--json", &json_path, "write the results here");
  if (const auto exit_code = flags.parse(argc, argv)) return *exit_code;
  reps = std::max(1, reps);
  if (threads > 0) omp_set_num_threads(threads);
  std::printf("%d threads\n", omp_get_max_threads());
  std::printf("%-30s %-3s %5s %5s %5s  %6s  %9s %9s  %s\n", "matmul", "op", "M", "N", "K", "copies", "plain ms",
              "padded ms", "plain/padded");
  CpuBackend be;
  std::string rows;
  for (const PaddedCase& s : kShapes) {
    const int64_t lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
    const auto A = pseudo_random(static_cast<size_t>((s.ta ? s.K : s.M) * lda), 1);
    const auto B = pseudo_random(static_cast<size_t>((s.tb ? s.N : s.K) * ldb), 2);
    std::vector<float> plain(static_cast<size_t>(s.M * s.N)), padded(plain.size());
    auto run = [&](bool through_backend, std::vector<float>& C) {
      const double t0 = now_s();
      if (through_backend) be.sgemm(s.ta, s.tb, s.M, s.N, s.K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C.data(), s.N);
      else ops::sgemm(s.ta, s.tb, s.M, s.N, s.K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C.data(), s.N);
      return now_s() - t0;
    };
    run(false, plain);  // warm-up: oneDNN's kernels, the scratch
    run(true, padded);
    std::vector<double> tp, tb;
    for (int r = 0; r < reps; ++r) {
      tp.push_back(run(false, plain));
      tb.push_back(run(true, padded));
    }
    if (std::memcmp(plain.data(), padded.data(), plain.size() * sizeof(float)) != 0) {
      std::fprintf(stderr, "%s: the backend's sgemm differs from the plain one in its bits\n", s.what);
      return 1;
    }
    const bool copies = ops::detail::pads_transposed_a(ops::detail::onednn_runs_avx2(), s.ta, s.tb, s.N, s.K, lda) ||
                        ops::detail::pads_transposed_b(s.ta, s.tb, s.N, s.K, ldb);
    const double p = median(tp), q = median(tb);
    std::printf("%-30s %-3s %5lld %5lld %5lld  %6s  %9.2f %9.2f  %.2fx\n", s.what, s.ta ? "TN" : "NT",
                static_cast<long long>(s.M), static_cast<long long>(s.N), static_cast<long long>(s.K), copies ? "yes" : "no",
                p * 1e3, q * 1e3, p / q);
    char row[320];
    std::snprintf(row, sizeof row,
                  "%s{\"matmul\":\"%s\",\"op\":\"%s\",\"M\":%lld,\"N\":%lld,\"K\":%lld,\"copies\":%s,\"plain_ms\":%.4f,"
                  "\"padded_ms\":%.4f,\"speedup\":%.4f}",
                  rows.empty() ? "" : ",", s.what, s.ta ? "TN" : "NT", static_cast<long long>(s.M),
                  static_cast<long long>(s.N), static_cast<long long>(s.K), copies ? "true" : "false", p * 1e3, q * 1e3, p / q);
    rows += row;
  }
  if (!json_path.empty()) {
    std::ofstream(json_path) << "{\"cpu_isa\":\"" << cpu_isa_name(active_cpu_isa()) << "\",\"threads\":"
                             << omp_get_max_threads() << ",\"rows\":[" << rows << "]}\n";
  }
  return 0;
}
