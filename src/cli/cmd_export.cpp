// tessera export: a checkpoint's model as a Hugging Face-style safetensors file (--out), or as a
// directory transformers opens with AutoModelForCausalLM.from_pretrained (--hf).
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "model/hf_weights.h"
#include "train/hf_export.h"
#include "train/model_source.h"

namespace tessera::cli {

Runner add_export(CLI::App& app) {
  struct Args {
    std::string run, out, hf, data;
    bool force = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("export", "Write a checkpoint's weights as safetensors (Hugging Face names)");
  c->add_option("--run", a->run, "Run directory (latest checkpoint) or checkpoint directory")->required();
  auto* out = c->add_option("--out", a->out, "Output .safetensors file (an existing one only with --force)");
  auto* hf = c->add_option("--hf", a->hf, "Output Hugging Face model directory (config.json, model.safetensors, tokenizer)");
  out->excludes(hf);
  c->add_option("--data", a->data, "--hf: dataset whose tokenizer to write (default: the run's)");
  c->add_flag("--force", a->force, "Replace an existing --out file, or the exported files in a non-empty --hf directory");
  return [a] {
    if (a->out.empty() && a->hf.empty()) return fail("give --out <file.safetensors> or --hf <directory>");
    std::error_code ec;
    if (!a->out.empty() && std::filesystem::exists(a->out, ec) && !a->force)
      return fail(invalid_argument(a->out + " already exists: pass --force to replace it, or choose another --out"));
    auto lm = load_model_from_checkpoint(a->run);
    if (!lm.ok()) return fail(lm.status());
    if (!a->hf.empty()) {
      auto r = export_hf_directory(a->hf, lm.value(), {a->data, a->force});
      if (!r.ok()) return fail(r.status());
      std::printf("wrote %s (%s, step %lld):", a->hf.c_str(), lm->config.name.c_str(), (long long)lm->step);
      for (const auto& f : r->files) std::printf(" %s", f.c_str());
      std::printf("\n");
      for (const auto& n : r->notes) std::printf("note: %s\n", n.c_str());
      return 0;
    }
    Status s = export_hf_weights(a->out, lm->config, lm->store->layout(), lm->store->params());
    if (!s.ok()) return fail(s);
    std::printf("wrote %s (%s, step %lld)\n", a->out.c_str(), lm->config.name.c_str(), (long long)lm->step);
    return 0;
  };
}

}  // namespace tessera::cli
