// Cost of the checkpoint fingerprint (checkpoint/fingerprint.h) on GPT-2 124M's tensors, in one run:
// every parameter tensor (the model's real shapes, random f32 values) is hashed whole with xxh64 --
// the per-piece checksum every save and load already computes, the reference -- and fingerprinted;
// then the same cut into 4 pieces (as 4 ranks would) to show the partials add up to the whole.
// A save or load fingerprints parameters + AdamW m + v: three times the parameter pass.
// Usage: bench_checkpoint_fingerprint [--model gpt2] [--reps 3] [--json path]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/fingerprint.h"
#include "checkpoint/format.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "bench_flags.h"

using namespace tessera;

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

int main(int argc, char** argv) {
  std::string model = "gpt2", json_path = "bench/results/checkpoint_fingerprint.json";
  int reps = 3;
  const bench::Flags flags =
      bench::Flags("bench_checkpoint_fingerprint", "The checkpoint fingerprint's cost on a model's tensors, against xxh64.")
          .option("--model", &model, "model preset")
          .option("--reps", &reps, "timings of each (the fastest is kept)")
          .option("--json", &json_path, "write the results here");
  if (const auto exit_code = flags.parse(argc, argv)) return *exit_code;
  reps = std::max(1, reps);
  auto cfg = model_preset(model);
  if (!cfg.ok()) {
    std::fprintf(stderr, "%s\n", cfg.status().message().c_str());
    return 1;
  }
  const ParamLayout layout(*cfg);
  std::vector<float> buf(static_cast<size_t>(layout.total_numel()));
  std::mt19937 gen(1);
  std::normal_distribution<float> dist(0.f, 0.02f);
  for (float& x : buf) x = dist(gen);

  double best_xxh = 1e30, best_fp = 1e30, best_fp4 = 1e30;
  uint64_t sink = 0;
  bool additive = true;
  int64_t elements = 0;
  for (const ParamInfo& p : layout.params()) elements += p.numel;
  for (int r = 0; r < reps; ++r) {
    double t0 = now();
    for (const ParamInfo& p : layout.params())
      sink ^= checkpoint::checksum_bytes(buf.data() + p.offset, static_cast<size_t>(p.numel) * sizeof(float));
    double t1 = now();
    std::vector<uint64_t> whole;
    for (const ParamInfo& p : layout.params())
      whole.push_back(checkpoint::fingerprint_elements(DType::f32, 0, p.numel, buf.data() + p.offset));
    double t2 = now();
    size_t k = 0;
    for (const ParamInfo& p : layout.params()) {  // 4 pieces, as 4 ranks would each fingerprint their own
      uint64_t sum = 0;
      for (int q = 0; q < 4; ++q) {
        const int64_t lo = p.numel * q / 4, hi = p.numel * (q + 1) / 4;
        sum += checkpoint::fingerprint_elements(DType::f32, lo, hi - lo, buf.data() + p.offset + lo);
      }
      additive = additive && sum == whole[k++];
    }
    double t3 = now();
    best_xxh = std::min(best_xxh, t1 - t0);
    best_fp = std::min(best_fp, t2 - t1);
    best_fp4 = std::min(best_fp4, t3 - t2);
  }
  const double gb = static_cast<double>(elements) * 4 / 1e9;
  std::printf("%s: %zu tensors, %lld parameters (%.2f GB f32), best of %d, one core\n", model.c_str(),
              layout.params().size(), (long long)elements, gb, reps);
  std::printf("%-34s %10s %10s %12s\n", "pass over the parameters", "seconds", "GB/s", "ns/element");
  auto row = [&](const char* name, double s) {
    std::printf("%-34s %10.3f %10.2f %12.3f\n", name, s, gb / s, s / static_cast<double>(elements) * 1e9);
  };
  row("xxh64 checksum (reference)", best_xxh);
  row("fingerprint, whole tensors", best_fp);
  row("fingerprint, 4 pieces per tensor", best_fp4);
  std::printf("fingerprint / xxh64: %.2f; params + AdamW m + v (a whole save or load): %.3f s fingerprint, %.3f s "
              "xxh64; partials of 4 pieces add up to the whole: %s\n",
              best_fp / best_xxh, 3 * best_fp, 3 * best_xxh, additive ? "yes" : "NO");
  nlohmann::json j = {{"model", model},
                      {"elements", elements},
                      {"reps", reps},
                      {"xxh64_s", best_xxh},
                      {"fingerprint_s", best_fp},
                      {"fingerprint_4_pieces_s", best_fp4},
                      {"fingerprint_over_xxh64", best_fp / best_xxh},
                      {"fingerprint_ns_per_element", best_fp / static_cast<double>(elements) * 1e9},
                      {"save_or_load_fingerprint_s", 3 * best_fp},
                      {"partials_add_up", additive},
                      {"checksum_sink", sink & 1}};
  std::ofstream(json_path) << j.dump(1) << "\n";
  std::printf("wrote %s\n", json_path.c_str());
  return additive ? 0 : 1;
}
