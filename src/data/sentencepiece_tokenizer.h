// SentencePiece tokenizer (BPE or unigram): training on text files and loading a .model file.
// Trained models use byte fallback and identity normalisation, so every string encodes and
// decode(encode(s)) == s exactly for valid UTF-8, whitespace and newlines included (SentencePiece
// reads text as UTF-8: an invalid byte becomes U+FFFD; use the byte tokenizer for binary data).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace tessera {

enum class SentencePieceModelType { bpe, unigram };

struct SentencePieceTrainOptions {
  std::vector<std::string> input_files;  // read line by line
  SentencePieceModelType model_type = SentencePieceModelType::bpe;
  int vocab_size = 4096;
  std::string model_path;                // where the .model file is written (atomically)
  int num_threads = 2;
  // Lines sampled for training (SentencePiece's input_sentence_size): bounds time and memory.
  int max_sentences = 200000;
  uint64_t seed = 0;  // the sampling seed; training is deterministic for a given seed and input
};

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // kind is what kind() reports ("bpe", "unigram"; "sentencepiece" for a model from elsewhere).
  static Result<std::unique_ptr<SentencePieceTokenizer>> load(const std::string& model_path,
                                                              const std::string& kind = "sentencepiece");
  // Trains, writes options.model_path, and returns the loaded tokenizer.
  static Result<std::unique_ptr<SentencePieceTokenizer>> train(const SentencePieceTrainOptions& options);
  ~SentencePieceTokenizer() override;

  std::vector<uint32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const uint32_t> ids) const override;
  uint32_t vocab_size() const override;
  std::string kind() const override;
  std::string spec() const override;
  const std::string& model_path() const { return model_path_; }

 private:
  SentencePieceTokenizer() = default;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string model_path_;
  std::string model_type_;  // "bpe", "unigram", ... as recorded in the model
};

}  // namespace tessera
