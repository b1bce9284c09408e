// Mixed-precision benchmark, in one run on this CPU:
//  1. matmul speed: the f32 sgemm against the bf16 matmul (native oneDNN kernel when the CPU has
//     AVX512-BF16/AMX, and the emulated path) and fp16 (emulated), on linear-layer shapes
//     out(M,N) = inp(M,K) @ W(N,K)^T, conversions of both operands included;
//  2. training: the same model, seed and batches trained in fp32 and in bf16 (and optionally fp16
//     with loss scaling), the per-step loss and the largest relative loss difference.
// Usage: bench_precision [--threads n] [--reps r] [--model bench-small] [--batch B] [--seq T]
//                        [--steps s] [--lr x] [--fp16] [--skip-train] [--json path]
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

#include "backend/cpu/cpu_backend.h"
#include "backend/ops.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/precision.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "optim/loss_scaler.h"
#include "bench_flags.h"

using namespace tessera;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string cpu_flags() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, out;
  while (std::getline(f, line))
    if (line.rfind("flags", 0) == 0) {
      for (const char* flag : {"avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_fp16", "f16c"})
        out += std::string(flag) + "=" + ((" " + line + " ").find(std::string(" ") + flag + " ") != std::string::npos ? "yes " : "no ");
      break;
    }
  return out;
}

std::vector<float> random(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.next_u32() % 20001) * 1e-4f - 1.f;
  return v;
}

// Seconds per call of f (median of reps after one warm-up).
template <typename F>
double time_it(int reps, F&& f) {
  f();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now();
    f();
    t.push_back(now() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// A learnable token stream: a fixed random successor table with a little noise.
struct Stream {
  std::vector<int32_t> next;
  Rng rng;
  int64_t V;
  Stream(int64_t V_, uint64_t seed) : rng(seed), V(V_) {
    Rng t(seed ^ 0x5eed);
    next.resize(static_cast<size_t>(V));
    for (auto& x : next) x = static_cast<int32_t>(t.next_u32() % V);
  }
  void fill(int32_t* tokens, int32_t* targets, int64_t B, int64_t T) {
    for (int64_t b = 0; b < B; ++b) {
      int32_t cur = static_cast<int32_t>(rng.next_u32() % V);
      for (int64_t t = 0; t <= T; ++t) {
        const int32_t nxt = rng.next_u32() % 4 == 0 ? static_cast<int32_t>(rng.next_u32() % V) : next[cur];
        if (t < T) tokens[b * T + t] = cur;
        if (t > 0) targets[b * T + t - 1] = cur;
        cur = nxt;
      }
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 5, steps = 200;
  int64_t B = 2, T = 256;
  float lr = 1e-3f;
  bool fp16 = false, skip_train = false, linears_only = false;
  std::string model = "bench-small", json, cpu_isa = "auto";
  const bench::Flags flags =
      bench::Flags("bench_precision", "Matmul speed and a training run in fp32 against bf16 (and fp16).")
          .option("--threads", &threads, "OpenMP threads")
          .option("--reps", &reps, "timings of each matmul (the fastest is kept)")
          .option("--model", &model, "model preset")
          .option("--batch", &B, "sequences per step")
          .option("--seq", &T, "tokens per sequence")
          .option("--steps", &steps, "training steps of each precision")
          .option("--lr", &lr, "learning rate of the training runs")
          .toggle("--fp16", &fp16, "also train in fp16 with loss scaling")
          .toggle("--skip-train", &skip_train, "matmuls only")
          .toggle("--linears-only", &linears_only, "only the model's linear layers, then stop")
          .cpu_isa(&cpu_isa)
          .option("--json", &json, "write the results here");
  if (const auto exit_code = flags.parse(argc, argv)) return *exit_code;
  omp_set_num_threads(threads);
  // The matmuls below run on one backend (its workspace and its bf16 switch), as a training run's do.
  CpuBackend cpu;
  std::string js = "{\n";
  std::printf("cpu flags: %s\nthreads: %d\nbf16 kernel: %s\n", cpu_flags().c_str(), threads,
              cpu.bf16_gemm_kernel().c_str());
  js += "\"bf16_kernel\": \"" + cpu.bf16_gemm_kernel() + "\",\n\"threads\": " +
        std::to_string(threads) + ",\n\"matmul\": [\n";

  // ---- 0. the model's linear layers as the trainer calls them (forward + backward, B*T rows),
  // fp32 against bf16, fastest of reps: conversions, transposed operands and accumulation included ----
  {
    const ModelConfig cfg = model_preset(model).value();
    const int64_t N = B * T, C = cfg.d_model, FC = cfg.d_ff, Q = cfg.qkv_width(), V = cfg.vocab_size;
    struct Lin {
      const char* name;
      int64_t in, out;
      int count;  // per step
    };
    const Lin lins[] = {{"qkv", C, Q, int(cfg.n_layer)}, {"proj", C, C, int(cfg.n_layer)}, {"fc", C, FC, int(cfg.n_layer)},
                        {"mproj", FC, C, int(cfg.n_layer)}, {"head", C, V, 1}};
    std::printf("\nlinears of %s, N=%ld rows, ms per call (fastest of %d)\n%-8s %10s %10s %10s %10s\n", model.c_str(),
                long(N), std::max(reps, 3), "layer", "f32 fwd", "bf16 fwd", "f32 bwd", "bf16 bwd");
    double tot[2] = {0, 0};
    for (const Lin& l : lins) {
      auto X = random(size_t(N * l.in), 3), W = random(size_t(l.out * l.in), 4), b = random(size_t(l.out), 5);
      auto dY = random(size_t(N * l.out), 6);
      std::vector<float> Y(size_t(N * l.out)), dX(size_t(N * l.in)), dW(size_t(l.out * l.in)), db(size_t(l.out));
      double t[2][2];
      for (int pi = 0; pi < 2; ++pi) {
        const auto p = pi == 0 ? ops::MatmulPrecision::fp32 : ops::MatmulPrecision::bf16;
        auto fastest = [&](auto&& f) {
          f();
          double best = 1e30;
          for (int r = 0; r < std::max(reps, 3); ++r) {
            const double t0 = now();
            f();
            best = std::min(best, now() - t0);
          }
          return best;
        };
        t[pi][0] = fastest([&] { cpu.matmul_forward_lowp(p, Y.data(), X.data(), W.data(), b.data(), N, l.in, l.out); });
        t[pi][1] = fastest([&] {
          cpu.matmul_backward_lowp(p, dX.data(), dW.data(), db.data(), dY.data(), X.data(), W.data(), N, l.in, l.out);
        });
        tot[pi] += l.count * (t[pi][0] + t[pi][1]);
      }
      std::printf("%-8s %10.2f %10.2f %10.2f %10.2f\n", l.name, t[0][0] * 1e3, t[1][0] * 1e3, t[0][1] * 1e3,
                  t[1][1] * 1e3);
    }
    std::printf("per step (all layers): f32 %.1f ms, bf16 %.1f ms (bf16/f32 %.2f)\n", tot[0] * 1e3, tot[1] * 1e3,
                tot[1] / tot[0]);
    char buf[160];
    std::snprintf(buf, sizeof buf, "\"linears_ms_per_step\": {\"f32\": %.2f, \"bf16\": %.2f},\n", tot[0] * 1e3,
                  tot[1] * 1e3);
    js.insert(js.rfind("\"matmul\""), buf);
    std::fflush(stdout);
    if (linears_only) return 0;
  }

  // ---- 1. matmul speed ----
  struct Shape {
    int64_t M, N, K;
  };
  const Shape shapes[] = {{512, 768, 768}, {4096, 768, 3072}, {4096, 3072, 768}, {4096, 2304, 768}};
  std::printf("\n%-18s %9s %9s %9s %9s %8s %8s\n", "M x N x K", "f32 GF/s", "bf16 nat", "bf16 emu", "fp16 emu",
              "nat/f32", "emu/f32");
  bool first = true;
  for (const Shape& s : shapes) {
    auto A = random(size_t(s.M * s.K), 1), W = random(size_t(s.N * s.K), 2);
    std::vector<float> C(size_t(s.M * s.N));
    const double flop = 2.0 * s.M * s.N * s.K;
    auto run = [&](ops::MatmulPrecision p, bool native) {
      cpu.set_bf16_gemm_native(native);
      const double t = time_it(reps, [&] {
        cpu.sgemm_lowp(p, false, true, s.M, s.N, s.K, 1.f, A.data(), s.K, W.data(), s.K, 0.f, C.data(), s.N);
      });
      cpu.set_bf16_gemm_native(true);
      return flop / t * 1e-9;
    };
    const double f32 = run(ops::MatmulPrecision::fp32, true);
    const double nat = run(ops::MatmulPrecision::bf16, true);
    const double emu = run(ops::MatmulPrecision::bf16, false);
    const double h = run(ops::MatmulPrecision::fp16, false);
    char name[64];
    std::snprintf(name, sizeof name, "%ldx%ldx%ld", long(s.M), long(s.N), long(s.K));
    std::printf("%-18s %9.1f %9.1f %9.1f %9.1f %8.2f %8.2f\n", name, f32, nat, emu, h, nat / f32, emu / f32);
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%s {\"shape\": \"%s\", \"f32_gflops\": %.2f, \"bf16_native_gflops\": %.2f, "
                  "\"bf16_emulated_gflops\": %.2f, \"fp16_emulated_gflops\": %.2f}",
                  first ? "" : ",\n", name, f32, nat, emu, h);
    js += buf;
    first = false;
  }
  js += "\n]";
  std::fflush(stdout);

  // ---- 2. training: fp32 vs bf16 (vs fp16 + loss scaling), same seed and batches ----
  if (!skip_train) {
    const ModelConfig cfg = model_preset(model).value();
    std::vector<Precision> modes = {Precision::fp32, Precision::bf16};
    if (fp16) modes.push_back(Precision::fp16);
    std::vector<std::vector<float>> losses(modes.size());
    std::vector<double> secs(modes.size());
    for (size_t m = 0; m < modes.size(); ++m) {
      ParamStore store{ParamLayout(cfg)};
      init_parameters(store, cfg, 1337);
      CpuBackend backend;
      Transformer net(backend, cfg, store, B, T);
      net.set_precision(modes[m]);
      AdamW opt(store.layout(), AdamWConfig{});
      LossScaler scaler(backend);
      Stream data(cfg.vocab_size, 42);
      std::vector<int32_t> tokens(size_t(B * T)), targets(size_t(B * T));
      const double t0 = now();
      for (int s = 0; s < steps; ++s) {
        data.fill(tokens.data(), targets.data(), B, T);
        store.zero_grads();
        losses[m].push_back(net.forward(tokens.data(), targets.data()));
        const bool scaled = modes[m] == Precision::fp16;
        net.backward(scaled ? scaler.scale() : 1.f);
        bool step_ok = true;
        if (scaled) {
          GradSpan g{store.grads(), store.numel()};
          step_ok = scaler.unscale_or_skip({&g, 1}, nullptr).value();
        }
        if (step_ok) {
          const float warm = std::min(1.f, float(s + 1) / 10.f);
          clip_grad_norm(store.grads(), store.numel(), 1.f);
          opt.step(store.params(), store.grads(), lr * warm);
        }
        if (s % 20 == 0 || s == steps - 1)
          std::printf("%s step %3d loss %.5f (%.2f s/step)\n", std::string(precision_name(modes[m])).c_str(), s,
                      losses[m].back(), (now() - t0) / (s + 1));
        std::fflush(stdout);
      }
      secs[m] = (now() - t0) / steps;
      if (modes[m] == Precision::fp16)
        std::printf("fp16 loss scale at the end %.0f, skipped steps %ld\n", scaler.scale(), long(scaler.skipped_steps()));
    }
    js += ",\n\"train\": {\"model\": \"" + model + "\", \"B\": " + std::to_string(B) + ", \"T\": " + std::to_string(T) +
          ", \"steps\": " + std::to_string(steps);
    std::printf("\n%s B=%ld T=%ld, %d steps, lr %g\n", model.c_str(), long(B), long(T), steps, lr);
    for (size_t m = 0; m < modes.size(); ++m) {
      const std::string name(precision_name(modes[m]));
      double worst = 0, worst_late = 0;
      int at = 0;
      for (int s = 0; s < steps; ++s) {
        const double d = std::abs(double(losses[m][s]) - losses[0][s]) / losses[0][s];
        if (d > worst) worst = d, at = s;
        if (s >= steps / 2) worst_late = std::max(worst_late, d);
      }
      std::printf("%-5s %.3f s/step  loss %.4f -> %.4f  max rel diff vs fp32 %.2e (step %d), second half %.2e\n",
                  name.c_str(), secs[m], losses[m][0], losses[m].back(), worst, at, worst_late);
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    ", \"%s\": {\"s_per_step\": %.4f, \"first_loss\": %.5f, \"last_loss\": %.5f, "
                    "\"max_rel_diff\": %.3e, \"max_rel_diff_step\": %d, \"max_rel_diff_second_half\": %.3e}",
                    name.c_str(), secs[m], losses[m][0], losses[m].back(), worst, at, worst_late);
      js += buf;
    }
    js += ", \"losses\": {";
    for (size_t m = 0; m < modes.size(); ++m) {
      js += std::string(m ? ", " : "") + "\"" + std::string(precision_name(modes[m])) + "\": [";
      for (int s = 0; s < steps; ++s) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%s%.6f", s ? "," : "", losses[m][s]);
        js += buf;
      }
      js += "]";
    }
    js += "}}";
  }
  js += "\n}\n";
  if (!json.empty()) std::ofstream(json) << js;
  return 0;
}
