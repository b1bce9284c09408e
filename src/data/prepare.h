// `prepare`: text files -> tokenizer (byte, trained BPE/unigram, or a given SentencePiece model) ->
// train/val token shards + manifest.json. Streaming: memory is bounded by one shard.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "data/manifest.h"

namespace tessera {

enum class TokenizerKind { byte, bpe, unigram, sentencepiece };
// "byte" | "bpe" | "unigram" | "sentencepiece"
Result<TokenizerKind> parse_tokenizer_kind(std::string_view s);
std::string_view tokenizer_kind_name(TokenizerKind k);

struct PrepareProgress {
  std::string_view phase;  // "train-tokenizer", "tokenize", "done"
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
};

struct PrepareOptions {
  std::vector<std::string> inputs;  // files or directories (recursively every regular file, sorted by path)
  std::string output_dir;
  TokenizerKind tokenizer = TokenizerKind::byte;
  std::string tokenizer_model;  // for TokenizerKind::sentencepiece: an existing .model file
  int vocab_size = 4096;        // for bpe / unigram training
  int tokenizer_max_sentences = 200000;  // lines sampled to train bpe / unigram
  int num_threads = 2;                   // tokenizer training threads
  // The val split is the tail of the concatenated input: every line starting in the last
  // val_fraction of the input bytes. 0 gives no val split.
  double val_fraction = 0.01;
  uint64_t shard_tokens = 10'000'000;  // tokens per shard file (the last of each split is smaller)
  // Replace a dataset already in output_dir. Only prepare's own files (manifest.json,
  // tokenizer.model, train_NNNNNN.bin, val_NNNNNN.bin) are ever removed.
  bool overwrite = false;
  std::function<void(const PrepareProgress&)> progress;  // called often; keep it cheap
};

// Each file is a document that ends with a newline in the token stream (one is added if missing).
// Lines are never split between train and val. Returns the manifest that was written.
Result<DatasetManifest> prepare_dataset(const PrepareOptions& options);

}  // namespace tessera
