// manifest.json reading, writing and verification (nlohmann::json).
#include "data/manifest.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "data/token_shard.h"

namespace tessera {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<std::string> DatasetManifest::shard_paths(const std::string& split) const {
  std::vector<std::string> out;
  for (const auto& s : shards)
    if (s.split == split) out.push_back((fs::path(dir) / s.file).string());
  return out;
}

std::string DatasetManifest::tokenizer_model_path() const {
  return tokenizer_model_file.empty() ? "" : (fs::path(dir) / tokenizer_model_file).string();
}

Status save_manifest(DatasetManifest& m, const std::string& dir) {
  json j;
  j["format"] = "tessera-token-dataset";
  j["format_version"] = 1;
  j["tokenizer"] = {{"kind", m.tokenizer_kind}, {"vocab_size", m.vocab_size}, {"model_file", m.tokenizer_model_file}};
  j["shard_version"] = m.shard_version;
  j["shard_tokens"] = m.shard_tokens;
  j["val_fraction"] = m.val_fraction;
  json shards = json::array();
  for (const auto& s : m.shards)
    shards.push_back({{"file", s.file}, {"split", s.split}, {"tokens", s.tokens}, {"xxh64", xxh64_hex(s.xxh64)}});
  j["shards"] = shards;
  j["totals"] = {{"train_tokens", m.train_tokens}, {"val_tokens", m.val_tokens}, {"source_bytes", m.source_bytes}};
  json sources = json::array();
  for (const auto& s : m.sources) sources.push_back({{"path", s.path}, {"bytes", s.bytes}});
  j["sources"] = sources;

  const fs::path path = fs::path(dir) / kManifestFile;
  TS_RETURN_IF_ERROR(write_file_atomic(path.string(), j.dump(2) + "\n"));
  m.dir = dir;
  return Status();
}

Result<DatasetManifest> load_manifest(const std::string& dir_or_file) {
  std::error_code ec;
  fs::path path = dir_or_file;
  if (fs::is_directory(path, ec)) path /= kManifestFile;
  if (!fs::is_regular_file(path, ec))
    return not_found("no dataset manifest at " + path.string() +
                     "; prepare a dataset first with `tessera prepare` (e.g. `tessera prepare --out " + dir_or_file + "`)");
  std::ifstream in(path);
  if (!in) return io_error("cannot read " + path.string());
  DatasetManifest m;
  m.dir = path.parent_path().string();
  if (m.dir.empty()) m.dir = ".";
  try {
    json j = json::parse(in);
    if (j.value("format", "") != "tessera-token-dataset")
      return corrupt_data(path.string() + " is not a Tessera dataset manifest (missing \"format\": \"tessera-token-dataset\")");
    const json& t = j.at("tokenizer");
    m.tokenizer_kind = t.at("kind").get<std::string>();
    m.vocab_size = t.at("vocab_size").get<uint32_t>();
    m.tokenizer_model_file = t.value("model_file", "");
    m.shard_version = j.at("shard_version").get<int32_t>();
    m.shard_tokens = j.value("shard_tokens", uint64_t{0});
    m.val_fraction = j.value("val_fraction", 0.0);
    for (const json& s : j.at("shards")) {
      ManifestShard e;
      e.file = s.at("file").get<std::string>();
      e.split = s.at("split").get<std::string>();
      e.tokens = s.at("tokens").get<uint64_t>();
      const std::string hex = s.at("xxh64").get<std::string>();
      size_t used = 0;
      e.xxh64 = std::stoull(hex, &used, 16);
      if (used != hex.size() || hex.size() != 16) throw std::invalid_argument("bad xxh64 '" + hex + "'");
      if (e.split != "train" && e.split != "val") throw std::invalid_argument("unknown split '" + e.split + "'");
      m.shards.push_back(std::move(e));
    }
    const json& tot = j.at("totals");
    m.train_tokens = tot.at("train_tokens").get<uint64_t>();
    m.val_tokens = tot.at("val_tokens").get<uint64_t>();
    m.source_bytes = tot.value("source_bytes", uint64_t{0});
    for (const json& s : j.value("sources", json::array())) m.sources.push_back({s.at("path"), s.at("bytes")});
  } catch (const std::exception& e) {
    return corrupt_data("dataset manifest " + path.string() + " is malformed: " + e.what() +
                        "; re-create the dataset with `tessera prepare --overwrite`");
  }
  return m;
}

Status verify_dataset(const DatasetManifest& m, bool check_checksums) {
  for (const auto& s : m.shards) {
    const std::string p = (fs::path(m.dir) / s.file).string();
    TS_ASSIGN_OR_RETURN(TokenShard shard, TokenShard::open(p));
    if (shard.size() != s.tokens)
      return corrupt_data(p + " holds " + std::to_string(shard.size()) + " tokens but the manifest records " +
                          std::to_string(s.tokens) + ": the dataset was modified; re-run `tessera prepare --overwrite`");
    if (check_checksums) {
      TS_ASSIGN_OR_RETURN(uint64_t h, file_xxh64(p));
      if (h != s.xxh64)
        return corrupt_data(p + " fails its checksum (xxh64 " + xxh64_hex(h) + ", manifest " + xxh64_hex(s.xxh64) +
                            "): the file is corrupt; re-run `tessera prepare --overwrite`");
    }
  }
  return Status();
}

Result<std::unique_ptr<Tokenizer>> open_dataset_tokenizer(const DatasetManifest& m) {
  TS_ASSIGN_OR_RETURN(auto t, open_tokenizer(m.tokenizer_kind, m.tokenizer_model_path()));
  if (t->vocab_size() != m.vocab_size)
    return corrupt_data("tokenizer " + m.tokenizer_model_path() + " has vocab " + std::to_string(t->vocab_size()) +
                        " but the manifest records " + std::to_string(m.vocab_size) + ": the tokenizer file was replaced");
  return t;
}

}  // namespace tessera
