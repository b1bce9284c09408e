// Importing pre-tokenized shards as a dataset.
#include "data/import_shards.h"

#include <filesystem>

#include "data/token_shard.h"

namespace fs = std::filesystem;

namespace tessera {

namespace {
char name_buf[32];
std::string shard_name(const char* split, size_t i) {
  std::snprintf(name_buf, sizeof name_buf, "%s_%06zu.bin", split, i);
  return name_buf;
}
}  // namespace

Result<DatasetManifest> import_shards(const ImportShardsOptions& o) {
  if (o.train_shards.empty()) return invalid_argument("import: give at least one training shard");
  if (o.vocab_size < 2)
    return invalid_argument("import: --vocab-size must name the vocabulary the shards were made with (GPT-2: 50257)");
  if (o.output_dir.empty()) return invalid_argument("import: --out is required");
  std::error_code ec;
  if (fs::exists(fs::path(o.output_dir) / kManifestFile) && !o.overwrite)
    return invalid_argument(o.output_dir + " already holds a dataset (manifest.json): choose another --out or pass "
                            "--overwrite");
  fs::create_directories(o.output_dir, ec);
  if (ec) return io_error("cannot create " + o.output_dir + ": " + ec.message());

  DatasetManifest m;
  m.tokenizer_kind = "external";
  m.vocab_size = o.vocab_size;
  for (const auto& [split, inputs] : {std::pair<const char*, const std::vector<std::string>*>{"train", &o.train_shards},
                                      {"val", &o.val_shards}}) {
    for (size_t i = 0; i < inputs->size(); ++i) {
      const std::string& src = (*inputs)[i];
      TS_ASSIGN_OR_RETURN(TokenShard shard, TokenShard::open(src));
      // Every token must fit the declared vocabulary, or training would index past the embedding.
      for (uint64_t t = 0; t < shard.size(); ++t)
        if (shard.token(t) >= o.vocab_size)
          return invalid_argument(src + " holds token id " + std::to_string(shard.token(t)) + " at position " +
                                  std::to_string(t) + ", outside --vocab-size " + std::to_string(o.vocab_size));
      const std::string name = shard_name(split, i);
      const fs::path dst = fs::path(o.output_dir) / name;
      const fs::path tmp = dst.string() + ".tmp";
      fs::copy_file(src, tmp, fs::copy_options::overwrite_existing, ec);
      if (!ec) fs::rename(tmp, dst, ec);
      if (ec) return io_error("cannot copy " + src + " to " + dst.string() + ": " + ec.message());
      TS_ASSIGN_OR_RETURN(uint64_t sum, file_xxh64(dst.string()));
      m.shards.push_back({name, split, shard.size(), sum});
      m.shard_version = static_cast<int32_t>(shard.version());
      (std::string_view(split) == "train" ? m.train_tokens : m.val_tokens) += shard.size();
      m.sources.push_back({fs::absolute(src).string(), static_cast<uint64_t>(fs::file_size(src))});
    }
  }
  TS_RETURN_IF_ERROR(save_manifest(m, o.output_dir));
  return m;
}

}  // namespace tessera
