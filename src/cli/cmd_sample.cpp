// tessera sample: generate text from a trained model (temperature, top-k).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "cli/commands.h"
#include "core/rng.h"
#include "data/manifest.h"
#include "model/transformer.h"
#include "train/model_source.h"

namespace tessera::cli {

namespace {
// Draws from softmax(logits / temperature) restricted to the top_k largest (top_k <= 0: all).
uint32_t sample_token(const float* logits, int64_t V, float temperature, int top_k, Rng& rng, std::vector<int>& idx) {
  idx.resize(V);
  std::iota(idx.begin(), idx.end(), 0);
  const int64_t k = top_k > 0 ? std::min<int64_t>(top_k, V) : V;
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  if (temperature <= 0) return static_cast<uint32_t>(idx[0]);
  const float mx = logits[idx[0]];
  double total = 0;
  std::vector<double> p(k);
  for (int64_t i = 0; i < k; ++i) total += p[i] = std::exp((logits[idx[i]] - mx) / temperature);
  double r = rng.uniform_double() * total;
  for (int64_t i = 0; i < k; ++i)
    if ((r -= p[i]) <= 0) return static_cast<uint32_t>(idx[i]);
  return static_cast<uint32_t>(idx[k - 1]);
}
}  // namespace

Runner add_sample(CLI::App& app) {
  struct Args {
    std::string run, tokenizer_data, prompt = "\n";
    int tokens = 200, top_k = 40, threads = 0;
    float temperature = 0.8f;
    uint64_t seed = 1;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("sample", "Generate text from a checkpoint");
  c->add_option("--run", a->run, "Run directory (latest checkpoint) or checkpoint directory")->required();
  c->add_option("--data", a->tokenizer_data, "Dataset whose tokenizer to use (default: the run's)");
  c->add_option("--prompt", a->prompt, "Text to continue");
  c->add_option("--tokens", a->tokens, "Tokens to generate")->capture_default_str()->check(CLI::Range(0, 1000000));
  c->add_option("--temperature", a->temperature, "Sampling temperature (0 = greedy)")->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  c->add_option("--top-k", a->top_k, "Sample among the k most likely tokens (0 = all)")->capture_default_str()
      ->check(CLI::Range(0, 1000000000));
  c->add_option("--seed", a->seed, "Random seed")->capture_default_str();
  c->add_option("--threads", a->threads, "Threads (0 = all cores)")->check(CLI::Range(0, 4096));
  return [a] {
    if (a->threads > 0) omp_set_num_threads(a->threads);
    auto lm = load_model_from_checkpoint(a->run);
    if (!lm.ok()) return fail(lm.status());
    const std::string data = a->tokenizer_data.empty() ? lm->data_dir : a->tokenizer_data;
    auto m = load_manifest(data);
    if (!m.ok()) return fail("cannot find the run's tokenizer: " + m.status().message() + " (pass --data)");
    auto tok = open_dataset_tokenizer(m.value());
    if (!tok.ok()) return fail(tok.status());
    std::vector<uint32_t> ids = (*tok)->encode(a->prompt);
    if (ids.empty()) ids.push_back(0);
    const ModelConfig& cfg = lm->config;
    const int64_t T = std::min<int64_t>(cfg.max_seq_len, static_cast<int64_t>(ids.size()) + a->tokens);
    CpuBackend backend;
    Transformer model(backend, cfg, *lm->store, 1, T);
    std::vector<int32_t> window(T, 0);
    std::vector<float> last_logits(static_cast<size_t>(cfg.vocab_size));  // the sampled row, on the host
    std::vector<int> scratch;
    Rng rng(a->seed);
    const size_t prompt_len = ids.size();
    for (int i = 0; i < a->tokens; ++i) {
      // Causal attention: padding after the last real token does not change its logits.
      const int64_t len = std::min<int64_t>(T, static_cast<int64_t>(ids.size()));
      std::fill(window.begin(), window.end(), 0);
      for (int64_t t = 0; t < len; ++t) window[t] = static_cast<int32_t>(ids[ids.size() - len + t]);
      model.forward(window.data(), nullptr);
      // crosses to the host: the logits of the last real position (the backend's memory)
      backend.copy_to_host(last_logits.data(), model.logits() + (len - 1) * model.logits_width(),
                           last_logits.size() * sizeof(float));
      ids.push_back(sample_token(last_logits.data(), cfg.vocab_size, a->temperature, a->top_k, rng, scratch));
    }
    // fwrite, not %s: decoded bytes may include NUL (byte tokenizer), which must not cut the text short.
    const std::string text =
        a->prompt + (*tok)->decode(std::span<const uint32_t>(ids.data() + prompt_len, ids.size() - prompt_len)) + "\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  };
}

}  // namespace tessera::cli
