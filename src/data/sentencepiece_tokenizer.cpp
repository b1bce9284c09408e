// SentencePiece training and loading. Training streams lines through a SentenceIterator so the
// corpus can be any list of files (no comma-joined path list, no temporary concatenation).
#include "data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "core/file_util.h"

namespace tessera {

namespace fs = std::filesystem;

namespace {

// Streams the lines of several files, in order, to the trainer.
class FileLineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit FileLineIterator(const std::vector<std::string>& files) : files_(files) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    while (true) {
      if (in_.is_open() && std::getline(in_, line_)) return;
      if (in_.is_open()) in_.close();
      if (next_file_ >= files_.size()) {
        done_ = true;
        return;
      }
      const std::string& f = files_[next_file_++];
      in_.open(f, std::ios::binary);
      if (!in_) {
        status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kNotFound, "cannot read " + f);
        done_ = true;
        return;
      }
    }
  }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return status_; }

 private:
  const std::vector<std::string>& files_;
  size_t next_file_ = 0;
  std::ifstream in_;
  std::string line_;
  bool done_ = false;
  sentencepiece::util::Status status_;
};

// Smallest vocabulary that can hold the 256 byte-fallback pieces, unk/bos/eos and a few characters.
constexpr int kMinVocab = 260;

}  // namespace

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

Result<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::load(const std::string& model_path,
                                                                             const std::string& kind) {
  std::error_code ec;
  if (!fs::is_regular_file(model_path, ec))
    return not_found("SentencePiece model " + model_path +
                     " does not exist; train one with `tessera prepare --tokenizer bpe --vocab-size N`");
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer());
  t->sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto st = t->sp_->Load(model_path);
  if (!st.ok())
    return corrupt_data("cannot load SentencePiece model " + model_path + ": " + st.ToString() +
                        " (is it a .model file written by SentencePiece?)");
  t->model_path_ = model_path;
  t->model_type_ = kind;
  return t;
}

Result<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::train(const SentencePieceTrainOptions& o) {
  if (o.vocab_size < kMinVocab)
    return invalid_argument("SentencePiece vocab size " + std::to_string(o.vocab_size) + " is too small: byte fallback needs " +
                            std::to_string(kMinVocab) + " or more (256 byte pieces + special tokens + characters)");
  if (o.input_files.empty()) return invalid_argument("SentencePiece training needs at least one input file");
  if (o.model_path.empty()) return invalid_argument("SentencePiece training needs a model_path to write the .model file to");
  for (const auto& f : o.input_files) {
    std::error_code ec;
    if (!fs::is_regular_file(f, ec)) return not_found("tokenizer training input " + f + " does not exist");
  }
  const char* type = o.model_type == SentencePieceModelType::bpe ? "bpe" : "unigram";
  // Identity normalisation, no dummy prefix and kept whitespace: decode(encode(s)) == s exactly.
  std::unordered_map<std::string, std::string> args = {
      {"model_type", type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"byte_fallback", "true"},
      {"character_coverage", "1.0"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"split_digits", "true"},
      {"input_sentence_size", std::to_string(o.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(o.num_threads)},
      {"minloglevel", "1"},
  };
  // SentencePiece keeps its sampling seed process-wide; set it on every call so training is
  // reproducible whatever ran before.
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned int>(o.seed));
  FileLineIterator it(o.input_files);
  std::string proto;
  auto st = sentencepiece::SentencePieceTrainer::Train(args, &it, &proto);
  if (!st.ok())
    return invalid_argument("SentencePiece " + std::string(type) + " training (vocab " + std::to_string(o.vocab_size) +
                            ") failed: " + st.ToString() +
                            " (a vocab size larger than the corpus supports, or too small for its characters, fails: change it)");
  TS_RETURN_IF_ERROR(write_file_atomic(o.model_path, proto));
  return load(o.model_path, type);
}

std::vector<uint32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  auto st = sp_->Encode(text, &ids);
  // With a loaded model, Encode only fails on a null output pointer: a bug, not bad input.
  if (!st.ok()) std::fprintf(stderr, "SentencePiece encode failed: %s\n", st.ToString().c_str());
  return std::vector<uint32_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(std::span<const uint32_t> ids) const {
  const uint32_t v = vocab_size();
  std::string out, piece;
  std::vector<int> run;
  auto flush = [&] {
    if (run.empty()) return;
    piece.clear();
    (void)sp_->Decode(run, &piece);  // cannot fail: every id in run is in range
    out += piece;
    run.clear();
  };
  for (uint32_t id : ids) {
    if (id < v) {
      run.push_back(static_cast<int>(id));
    } else {
      flush();
      out += "\xEF\xBF\xBD";
    }
  }
  flush();
  return out;
}

uint32_t SentencePieceTokenizer::vocab_size() const { return static_cast<uint32_t>(sp_->GetPieceSize()); }
std::string SentencePieceTokenizer::kind() const { return model_type_; }
std::string SentencePieceTokenizer::spec() const {
  return "sentencepiece " + model_type_ + ", vocab " + std::to_string(vocab_size()) + " (" + model_path_ + ")";
}

}  // namespace tessera
