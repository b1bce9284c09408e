// Wraps token shards that were tokenized elsewhere (e.g. llm.c's published GPT-2 .bin shards) into a
// Tessera dataset: the shards are validated and copied into the dataset directory and a manifest
// with tokenizer kind "external" is written. Training and eval work on it; text commands (sample)
// need a tokenizer Tessera does not have, and say so.
#pragma once
#include <string>
#include <vector>

#include "core/status.h"
#include "data/manifest.h"

namespace tessera {

struct ImportShardsOptions {
  std::vector<std::string> train_shards;
  std::vector<std::string> val_shards;
  std::string output_dir;
  uint32_t vocab_size = 0;  // of the tokenizer that made the shards (GPT-2: 50257)
  bool overwrite = false;   // replace an existing dataset (only its manifest and shard files)
};

Result<DatasetManifest> import_shards(const ImportShardsOptions& options);

}  // namespace tessera
