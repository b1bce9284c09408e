// Tokenizer interface shared by the byte-level and SentencePiece tokenizers, and a factory that
// opens one from its kind and model file (as recorded in a dataset manifest).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Every string encodes (byte fallback); decode(encode(s)) == s for the tokenizers here (for
  // SentencePiece: for valid UTF-8).
  virtual std::vector<uint32_t> encode(std::string_view text) const = 0;
  // Ids >= vocab_size() (a model's padded vocabulary can sample them) decode to U+FFFD.
  virtual std::string decode(std::span<const uint32_t> ids) const = 0;
  virtual uint32_t vocab_size() const = 0;
  // Kind as written in manifests: "byte", "bpe", "unigram" or "sentencepiece".
  virtual std::string kind() const = 0;
  // Human-readable description, e.g. "sentencepiece bpe, vocab 4096".
  virtual std::string spec() const = 0;
};

// kind "byte" needs no model file; "bpe", "unigram" and "sentencepiece" load a SentencePiece .model.
Result<std::unique_ptr<Tokenizer>> open_tokenizer(const std::string& kind, const std::string& model_path);

}  // namespace tessera
