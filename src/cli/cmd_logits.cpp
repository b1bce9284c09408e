// tessera logits: the model's next-token logits for given token ids (or a text's), written as
// safetensors, so other tools (tools/check_hf_export.py, transformers) can be compared with Tessera.
#include <omp.h>

#include <cstdio>
#include <sstream>

#include "backend/cpu/cpu_backend.h"
#include "cli/commands.h"
#include "cli/model_source_options.h"
#include "data/manifest.h"
#include "model/safetensors.h"
#include "model/transformer.h"
#include "train/model_source.h"

namespace tessera::cli {

namespace {
// "3,1,4" or "3 1 4" -> ids; false on anything else.
bool parse_ids(const std::string& s, std::vector<uint32_t>* ids) {
  std::string t = s;
  for (char& ch : t)
    if (ch == ',') ch = ' ';
  std::istringstream in(t);
  long long v;
  while (in >> v) {
    if (v < 0 || v > 0xFFFFFFFFll) return false;
    ids->push_back(static_cast<uint32_t>(v));
  }
  return in.eof() && !ids->empty();
}
}  // namespace

Runner add_logits(CLI::App& app) {
  struct Args {
    ModelSourceArgs source;
    std::string data, ids, text, out;
    int threads = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("logits", "Write the model's logits for token ids or a text (safetensors)");
  add_model_source_options(c, a->source);
  auto* ids = c->add_option("--ids", a->ids, "Token ids, e.g. 3,1,4");
  auto* text = c->add_option("--text", a->text, "Text to encode with the dataset's tokenizer");
  ids->excludes(text);
  c->add_option("--data", a->data, "--text: dataset whose tokenizer to use (default: the run's)");
  c->add_option("--out", a->out, "Output .safetensors: logits (T, V) and tokens (T) as F32")->required();
  c->add_option("--threads", a->threads, "Threads (0 = all cores)")->check(CLI::Range(0, 4096));
  return [a] {
    if (a->threads > 0) omp_set_num_threads(a->threads);
    if (a->ids.empty() && a->text.empty()) return fail("give --ids <id,id,...> or --text <string>");
    auto lm = load_model_source(a->source);
    if (!lm.ok()) return fail(lm.status());
    const ModelConfig& cfg = lm->config;
    std::vector<uint32_t> tokens;
    if (!a->ids.empty()) {
      if (!parse_ids(a->ids, &tokens)) return fail("--ids '" + a->ids + "': give non-negative integers, e.g. 3,1,4");
    } else {
      const std::string data = a->data.empty() ? lm->data_dir : a->data;
      if (data.empty()) return fail("--text needs a tokenizer: pass --data <prepared dataset directory>");
      auto m = load_manifest(data);
      if (!m.ok()) return fail(m.status());
      auto tok = open_dataset_tokenizer(m.value());
      if (!tok.ok()) return fail(tok.status());
      tokens = (*tok)->encode(a->text);
      if (tokens.empty()) return fail("--text encodes to no tokens; give a non-empty text");
    }
    const int64_t T = static_cast<int64_t>(tokens.size()), V = cfg.vocab_size;
    if (T > cfg.max_seq_len)
      return fail(std::to_string(T) + " tokens exceed the model's max_seq_len " + std::to_string(cfg.max_seq_len) +
                  "; give fewer");
    std::vector<int32_t> window(T);
    std::vector<float> as_float(T);  // F32 holds every id below 2^24 exactly
    for (int64_t t = 0; t < T; ++t) {
      if (tokens[t] >= V)
        return fail("token id " + std::to_string(tokens[t]) + " is outside the model's vocabulary of " +
                    std::to_string(V));
      window[t] = static_cast<int32_t>(tokens[t]);
      as_float[t] = static_cast<float>(tokens[t]);
    }
    CpuBackend backend;
    Transformer model(backend, cfg, *lm->store, 1, T);
    model.forward(window.data(), nullptr);
    std::vector<float> logits(static_cast<size_t>(T * V));  // crosses to the host: the (T, V) logits
    backend.copy_to_host(logits.data(), model.logits(), logits.size() * sizeof(float));
    Status s = write_safetensors(a->out, std::vector<TensorRef>{{"logits", {T, V}, logits.data()},
                                                               {"tokens", {T}, as_float.data()}});
    if (!s.ok()) return fail(s);
    std::printf("tokens:");
    for (uint32_t id : tokens) std::printf(" %u", id);
    std::printf("\nwrote %s (logits %lld x %lld)\n", a->out.c_str(), (long long)T, (long long)V);
    return 0;
  };
}

}  // namespace tessera::cli
