// The model a command reads: `--run DIR` (a checkpoint) or `--weights F|HF_DIR [--model PRESET]`,
// the same flags and the same errors for every command that takes either (eval, logits).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "train/model_source.h"

namespace tessera::cli {

struct ModelSourceArgs {
  std::string run, weights, model;
};

// Adds --run or --weights (exactly one is required) and --model to `c`.
void add_model_source_options(CLI::App* c, ModelSourceArgs& a);
// The model the flags name.
Result<LoadedModel> load_model_source(const ModelSourceArgs& a);

}  // namespace tessera::cli
