// tessera eval: loss and perplexity of a checkpoint or a weights file on a token split.
#include <omp.h>

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "cli/commands.h"
#include "cli/model_source_options.h"
#include "data/loader.h"
#include "data/manifest.h"
#include "model/transformer.h"
#include "parallel/evaluate.h"
#include "train/model_source.h"

namespace tessera::cli {

Runner add_eval(CLI::App& app) {
  struct Args {
    ModelSourceArgs source;
    std::string data, split = "val", shard;
    int64_t batches = 0, batch = 4, seq = 0;
    int threads = 0;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("eval", "Loss and perplexity of a model on a dataset split");
  add_model_source_options(c, a->source);
  c->add_option("--data", a->data, "Prepared dataset directory (default: the one the run trained on)");
  c->add_option("--split", a->split, "train | val")->capture_default_str();
  c->add_option("--shard", a->shard, "Evaluate on this token shard file instead of a dataset split")
      ->check(CLI::ExistingFile);
  c->add_option("--batches", a->batches, "Batches to evaluate (0 = the whole split)")->check(CLI::Range(0, 1000000000));
  c->add_option("--batch", a->batch, "Sequences per batch")->capture_default_str()->check(CLI::Range(1, 1000000));
  c->add_option("--seq", a->seq, "Sequence length (default: the model's max_seq_len)")->check(CLI::Range(0, 1000000));
  c->add_option("--threads", a->threads, "Threads (0 = all cores)")->check(CLI::Range(0, 4096));
  c->add_flag("--json", a->json, "Print the result as one JSON object on stdout");
  return [a] {
    if (a->threads > 0) omp_set_num_threads(a->threads);
    auto lm = load_model_source(a->source);
    if (!lm.ok()) return fail(lm.status());
    const int64_t T = a->seq > 0 ? a->seq : lm->config.max_seq_len;
    if (T > lm->config.max_seq_len) return fail("--seq exceeds the model's max_seq_len");
    std::string what;
    double bytes_per_token = 0;  // known for a prepared dataset
    Result<EvalLoader> loader = invalid_argument("no data");
    if (!a->shard.empty()) {
      what = a->shard;
      loader = EvalLoader::open_shards({a->shard}, static_cast<int>(a->batch), static_cast<int>(T));
    } else {
      const std::string data = a->data.empty() ? lm->data_dir : a->data;
      if (data.empty()) return fail("no dataset: pass --data <prepared dataset directory> or --shard <file.bin>");
      auto m = load_manifest(data);
      if (!m.ok()) return fail(m.status());
      if (m->vocab_size > lm->config.vocab_size)
        return fail("dataset vocabulary " + std::to_string(m->vocab_size) + " exceeds the model's " +
                    std::to_string(lm->config.vocab_size) + ": evaluate on data made with the model's tokenizer");
      what = data + "/" + a->split;
      bytes_per_token = m->bytes_per_token();
      loader = EvalLoader::open(m.value(), a->split, static_cast<int>(a->batch), static_cast<int>(T));
    }
    if (!loader.ok()) return fail(loader.status());
    CpuBackend backend;
    Transformer model(backend, lm->config, *lm->store, a->batch, T);
    auto result = evaluate_loss(model, loader.value(), a->batches);
    if (!result.ok()) return fail(what + ": " + result.status().message());
    const int64_t n = result->batches;
    if (n == 0) return fail(what + " has no full batch of " + std::to_string(a->batch) + "x" +
                            std::to_string(T) + " tokens; lower --batch or --seq");
    const double loss = result->mean_loss;
    if (a->json) {
      nlohmann::json j = {{"source", lm->source}, {"data", what}, {"loss", loss}, {"perplexity", std::exp(loss)},
                          {"batches", n}, {"batch", a->batch}, {"seq", T}};
      j["loss_per_byte"] = bytes_per_token > 0 ? nlohmann::json(loss / bytes_per_token) : nlohmann::json(nullptr);
      std::printf("%s\n", j.dump().c_str());
      return 0;
    }
    std::printf("%s on %s: loss %.4f nats/token, perplexity %.3f (%lld batches of %lldx%lld)\n",
                lm->source.c_str(), what.c_str(), loss, std::exp(loss), (long long)n,
                (long long)a->batch, (long long)T);
    if (bytes_per_token > 0)
      std::printf("  = %.4f nats/byte (the dataset averages %.3f bytes of text per token)\n", loss / bytes_per_token,
                  bytes_per_token);
    return 0;
  };
}

}  // namespace tessera::cli
