// prepare_dataset: tokenizer set-up, streaming tokenisation in line-aligned chunks, split by byte
// position, sharding, and the manifest written last.
#include "data/prepare.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string_view>

#include "core/log.h"
#include "data/byte_tokenizer.h"
#include "data/corpus.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/token_shard.h"

namespace tessera {

namespace fs = std::filesystem;

Result<TokenizerKind> parse_tokenizer_kind(std::string_view s) {
  if (s == "byte") return TokenizerKind::byte;
  if (s == "bpe") return TokenizerKind::bpe;
  if (s == "unigram") return TokenizerKind::unigram;
  if (s == "sentencepiece") return TokenizerKind::sentencepiece;
  return invalid_argument("unknown tokenizer '" + std::string(s) + "': use byte, bpe, unigram or sentencepiece");
}

std::string_view tokenizer_kind_name(TokenizerKind k) {
  switch (k) {
    case TokenizerKind::byte: return "byte";
    case TokenizerKind::bpe: return "bpe";
    case TokenizerKind::unigram: return "unigram";
    case TokenizerKind::sentencepiece: return "sentencepiece";
  }
  return "?";
}

namespace {

bool is_prepare_output(const std::string& name) {
  static const std::regex shard(R"((train|val)_\d{6}\.bin)");
  return name == kManifestFile || name == kTokenizerModelFile || std::regex_match(name, shard);
}

// Refuses to touch an existing dataset unless asked; with overwrite, removes only prepare's own files.
Status prepare_output_dir(const std::string& dir, bool overwrite) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    return invalid_argument("output " + dir + " exists and is not a directory");
  fs::create_directories(dir, ec);
  if (ec) return io_error("cannot create output directory " + dir + ": " + ec.message());
  std::vector<fs::path> ours;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (is_prepare_output(e.path().filename().string())) ours.push_back(e.path());
  if (ec) return io_error("cannot list " + dir + ": " + ec.message());
  if (ours.empty()) return Status();
  if (!overwrite)
    return invalid_argument("output directory " + dir + " already holds a prepared dataset (" +
                            ours.front().filename().string() +
                            "); pass --overwrite to replace it or choose another output directory");
  // The manifest goes first: a crash part-way then leaves a directory that no loader accepts.
  fs::remove(fs::path(dir) / kManifestFile, ec);
  for (const auto& p : ours) {
    fs::remove(p, ec);
    if (ec) return io_error("cannot remove old " + p.string() + ": " + ec.message());
  }
  return Status();
}

// Accumulates one split's tokens and writes full shards as they fill.
class ShardSink {
 public:
  ShardSink(std::string dir, std::string split, uint64_t shard_tokens, int32_t version, DatasetManifest* m)
      : dir_(std::move(dir)), split_(std::move(split)), shard_tokens_(shard_tokens), version_(version), m_(m) {}
  Status add(const std::vector<uint32_t>& ids) {
    size_t i = 0;
    while (i < ids.size()) {
      size_t take = std::min<size_t>(ids.size() - i, shard_tokens_ - buf_.size());
      buf_.insert(buf_.end(), ids.begin() + i, ids.begin() + i + take);
      i += take;
      if (buf_.size() == shard_tokens_) TS_RETURN_IF_ERROR(flush());
    }
    return Status();
  }
  Status flush() {
    if (buf_.empty()) return Status();
    char name[32];
    std::snprintf(name, sizeof(name), "%s_%06d.bin", split_.c_str(), next_++);
    TS_ASSIGN_OR_RETURN(ShardWriteInfo info, write_token_shard((fs::path(dir_) / name).string(), buf_, version_));
    m_->shards.push_back({name, split_, info.tokens, info.xxh64});
    (split_ == "train" ? m_->train_tokens : m_->val_tokens) += info.tokens;
    buf_.clear();
    return Status();
  }

 private:
  std::string dir_, split_;
  uint64_t shard_tokens_;
  int32_t version_;
  DatasetManifest* m_;
  std::vector<uint32_t> buf_;
  int next_ = 0;
};

// Reads a file as line-aligned chunks, so tokenisation depends only on the content, never on read
// sizes, and memory stays small for any file size. A chunk ends at the last newline within kChunk
// bytes of its start, or at the next newline when a line is longer. A missing final newline is added.
class LineChunkReader {
 public:
  explicit LineChunkReader(const std::string& path) : in_(path, std::ios::binary) {}
  bool is_open() const { return static_cast<bool>(in_); }
  // The next chunk (valid until the next call) and its offset in the file; false at the end.
  Result<bool> next(std::string_view* chunk, uint64_t* offset) {
    if (pos_ > kRead) {  // drop consumed bytes
      buf_.erase(0, pos_);
      base_ += pos_;
      pos_ = 0;
    }
    TS_RETURN_IF_ERROR(fill(kChunk));
    if (pos_ == buf_.size()) return false;
    const size_t end = std::min(buf_.size(), pos_ + kChunk);
    size_t cut = end;
    while (cut > pos_ && buf_[cut - 1] != '\n') --cut;
    if (cut == pos_) {  // a line longer than kChunk: extend to its end
      size_t scan = end;
      while (true) {
        const size_t nl = buf_.find('\n', scan);
        if (nl != std::string::npos) {
          cut = nl + 1;
          break;
        }
        if (eof_) {
          cut = buf_.size();
          break;
        }
        scan = buf_.size();
        TS_RETURN_IF_ERROR(fill(buf_.size() - pos_ + kRead));
      }
    }
    *chunk = std::string_view(buf_.data() + pos_, cut - pos_);
    *offset = base_ + pos_;
    pos_ = cut;
    return true;
  }

 private:
  static constexpr size_t kChunk = 1 << 16;
  static constexpr size_t kRead = 1 << 20;
  // Reads until `want` unconsumed bytes are buffered or the file ends.
  Status fill(size_t want) {
    while (!eof_ && buf_.size() - pos_ < want) {
      const size_t old = buf_.size();
      buf_.resize(old + kRead);
      in_.read(buf_.data() + old, static_cast<std::streamsize>(kRead));
      buf_.resize(old + static_cast<size_t>(in_.gcount()));
      if (in_.bad()) return io_error("read error on an input file");
      if (in_.eof() || in_.gcount() == 0) {
        eof_ = true;
        // Chunks before the end always end in a newline, so only unconsumed bytes can lack one.
        if (buf_.size() > pos_ && buf_.back() != '\n') buf_.push_back('\n');
      }
    }
    return Status();
  }
  std::ifstream in_;
  std::string buf_;
  size_t pos_ = 0;     // first unconsumed byte of buf_
  uint64_t base_ = 0;  // file offset of buf_[0]
  bool eof_ = false;
};

Result<std::unique_ptr<Tokenizer>> make_tokenizer(const PrepareOptions& o, const std::vector<InputFile>& files,
                                                  std::string* model_file) {
  const fs::path model_path = fs::path(o.output_dir) / kTokenizerModelFile;
  switch (o.tokenizer) {
    case TokenizerKind::byte:
      model_file->clear();
      return std::unique_ptr<Tokenizer>(std::make_unique<ByteTokenizer>());
    case TokenizerKind::sentencepiece: {
      if (o.tokenizer_model.empty())
        return invalid_argument("tokenizer 'sentencepiece' needs the path of an existing .model file");
      TS_ASSIGN_OR_RETURN(auto probe, SentencePieceTokenizer::load(o.tokenizer_model));  // validate before copying
      (void)probe;
      std::error_code ec;
      fs::copy_file(o.tokenizer_model, model_path, fs::copy_options::overwrite_existing, ec);
      if (ec) return io_error("cannot copy " + o.tokenizer_model + " to " + model_path.string() + ": " + ec.message());
      *model_file = kTokenizerModelFile;
      TS_ASSIGN_OR_RETURN(auto t, SentencePieceTokenizer::load(model_path.string()));
      return std::unique_ptr<Tokenizer>(std::move(t));
    }
    case TokenizerKind::bpe:
    case TokenizerKind::unigram: {
      SentencePieceTrainOptions so;
      for (const auto& f : files) so.input_files.push_back(f.path);
      so.model_type = o.tokenizer == TokenizerKind::bpe ? SentencePieceModelType::bpe : SentencePieceModelType::unigram;
      so.vocab_size = o.vocab_size;
      so.model_path = model_path.string();
      so.num_threads = o.num_threads;
      so.max_sentences = o.tokenizer_max_sentences;
      *model_file = kTokenizerModelFile;
      TS_ASSIGN_OR_RETURN(auto t, SentencePieceTokenizer::train(so));
      return std::unique_ptr<Tokenizer>(std::move(t));
    }
  }
  return internal_error("unhandled tokenizer kind");
}

}  // namespace

Result<DatasetManifest> prepare_dataset(const PrepareOptions& o) {
  if (o.output_dir.empty()) return invalid_argument("prepare needs an output directory");
  if (!(o.val_fraction >= 0.0 && o.val_fraction < 1.0))
    return invalid_argument("val fraction " + std::to_string(o.val_fraction) + " must be in [0, 1)");
  if (o.shard_tokens < 1 || o.shard_tokens > static_cast<uint64_t>(INT32_MAX))
    return invalid_argument("shard size " + std::to_string(o.shard_tokens) + " tokens must be in [1, 2^31-1]");
  TS_ASSIGN_OR_RETURN(std::vector<InputFile> files, collect_input_files(o.inputs, o.output_dir));
  TS_RETURN_IF_ERROR(prepare_output_dir(o.output_dir, o.overwrite));

  DatasetManifest m;
  uint64_t total = 0;
  for (const auto& f : files) {
    total += f.bytes;
    m.sources.push_back({f.path, f.bytes});
  }
  m.source_bytes = total;
  auto report = [&](std::string_view phase, uint64_t done) {
    if (o.progress) o.progress(PrepareProgress{phase, done, total});
  };

  if (o.tokenizer == TokenizerKind::bpe || o.tokenizer == TokenizerKind::unigram) report("train-tokenizer", 0);
  std::string model_file;
  TS_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, make_tokenizer(o, files, &model_file));
  m.tokenizer_kind = std::string(tokenizer_kind_name(o.tokenizer));
  m.vocab_size = tok->vocab_size();
  m.tokenizer_model_file = model_file;
  m.shard_version = shard_version_for_vocab(m.vocab_size);
  m.shard_tokens = o.shard_tokens;
  m.val_fraction = o.val_fraction;

  // A line goes to val when it starts at or after this byte of the concatenated input.
  const uint64_t val_start = o.val_fraction > 0 ? static_cast<uint64_t>(static_cast<double>(total) * (1.0 - o.val_fraction)) : total + 1;
  ShardSink train(o.output_dir, "train", o.shard_tokens, m.shard_version, &m);
  ShardSink val(o.output_dir, "val", o.shard_tokens, m.shard_version, &m);

  uint64_t offset = 0;  // of the current file's start in the concatenated input
  for (const auto& f : files) {
    report("tokenize", offset);
    LineChunkReader reader(f.path);
    if (!reader.is_open()) return io_error("cannot read input " + f.path);
    std::string_view chunk;
    uint64_t at = 0;  // chunk start within the file
    while (true) {
      TS_ASSIGN_OR_RETURN(bool more, reader.next(&chunk, &at));
      if (!more) break;
      // Split the chunk at its first line that starts at or after val_start.
      size_t split = chunk.size();
      if (offset + at + chunk.size() > val_start) {
        size_t s = 0;
        while (s < chunk.size() && offset + at + s < val_start) {
          while (s < chunk.size() && chunk[s] != '\n') ++s;  // to the end of this line
          ++s;                                               // start of the next
        }
        split = std::min(s, chunk.size());
      }
      if (split > 0) TS_RETURN_IF_ERROR(train.add(tok->encode(chunk.substr(0, split))));
      if (split < chunk.size()) TS_RETURN_IF_ERROR(val.add(tok->encode(chunk.substr(split))));
      report("tokenize", offset + std::min<uint64_t>(at + chunk.size(), f.bytes));
    }
    offset += f.bytes;
  }
  TS_RETURN_IF_ERROR(train.flush());
  TS_RETURN_IF_ERROR(val.flush());
  if (m.train_tokens == 0) return invalid_argument("the inputs produced no training tokens (are they empty?)");
  if (o.val_fraction > 0 && m.val_tokens == 0)
    log_warn("prepare: val fraction " + std::to_string(o.val_fraction) + " selected no whole line; the dataset has no val split");
  TS_RETURN_IF_ERROR(save_manifest(m, o.output_dir));
  report("done", total);
  return m;
}

}  // namespace tessera
