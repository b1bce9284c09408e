// tessera export: a checkpoint's model as a Hugging Face-style safetensors file.
#include <cstdio>

#include "cli/commands.h"
#include "model/hf_weights.h"
#include "train/model_source.h"

namespace tessera::cli {

Runner add_export(CLI::App& app) {
  struct Args {
    std::string run, out;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("export", "Write a checkpoint's weights as safetensors (Hugging Face names)");
  c->add_option("--run", a->run, "Run directory (latest checkpoint) or checkpoint directory")->required();
  c->add_option("--out", a->out, "Output .safetensors file")->required();
  return [a] {
    auto lm = load_model_from_checkpoint(a->run);
    if (!lm.ok()) return fail(lm.status().message());
    Status s = export_hf_weights(a->out, lm->config, lm->store->layout(), lm->store->params());
    if (!s.ok()) return fail(s.message());
    std::printf("wrote %s (%s, step %lld)\n", a->out.c_str(), lm->config.name.c_str(), (long long)lm->step);
    return 0;
  };
}

}  // namespace tessera::cli
