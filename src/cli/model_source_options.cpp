// --run | --weights [--model] (see model_source_options.h).
#include "cli/model_source_options.h"

namespace tessera::cli {

void add_model_source_options(CLI::App* c, ModelSourceArgs& a) {
  // Exactly one of the two: CLI11 reports a missing or doubled source as a usage error.
  CLI::Option_group* source = c->add_option_group("model", "The model: a checkpoint or a weights file");
  source->add_option("--run", a.run, "Run directory (latest checkpoint) or checkpoint directory");
  source->add_option("--weights", a.weights, "safetensors file or Hugging Face directory instead of a checkpoint");
  source->require_option(1);
  c->add_option("--model", a.model, "Model preset for a weights file without Tessera metadata");
}

Result<LoadedModel> load_model_source(const ModelSourceArgs& a) {
  return a.run.empty() ? load_model_from_weights(a.weights, a.model) : load_model_from_checkpoint(a.run);
}

}  // namespace tessera::cli
