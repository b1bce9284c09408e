// Hugging Face tokenizer files for the byte and SentencePiece tokenizers.
#include "data/hf_tokenizer.h"

#include <sentencepiece_processor.h>

#include <nlohmann/json.hpp>

#include "core/file_util.h"

namespace tessera {

namespace {

using nlohmann::json;

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others for code points
// 256, 257, ... in byte order. Byte-level pre-tokenisation writes each byte as this character.
std::string byte_level_char(int b) {
  auto printable = [](int c) { return (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF); };
  int cp = b;
  if (!printable(b)) {
    cp = 256;
    for (int c = 0; c < b; ++c) cp += !printable(c);
  }
  std::string s;  // UTF-8 of cp (< 0x800)
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

HfTokenizerFiles byte_files(int64_t model_max_length) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_char(b)] = b;
  // No regex split, no prefix space, no merges: every byte of the UTF-8 text is one token.
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
                           {"use_regex", false}};
  const json tok = {{"version", "1.0"},
                    {"truncation", nullptr},
                    {"padding", nullptr},
                    {"added_tokens", json::array()},
                    {"normalizer", nullptr},
                    {"pre_tokenizer", byte_level},
                    {"post_processor", nullptr},
                    {"decoder", byte_level},
                    {"model",
                     {{"type", "BPE"},
                      {"dropout", nullptr},
                      {"unk_token", nullptr},
                      {"continuing_subword_prefix", nullptr},
                      {"end_of_word_suffix", nullptr},
                      {"fuse_unk", false},
                      {"byte_fallback", false},
                      {"vocab", vocab},
                      {"merges", json::array()}}}};
  const json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                       {"model_max_length", model_max_length},
                       {"clean_up_tokenization_spaces", false}};
  HfTokenizerFiles out;
  out.files["tokenizer.json"] = tok.dump(1) + "\n";
  out.files["tokenizer_config.json"] = config.dump(2) + "\n";
  out.note = "tokenizer: byte-level (id = byte value) as tokenizer.json; AutoTokenizer.from_pretrained(DIR) "
             "encodes every string to the same ids as Tessera";
  return out;
}

Result<HfTokenizerFiles> sentencepiece_files(const DatasetManifest& m, int64_t model_max_length) {
  const std::string path = m.tokenizer_model_path();
  TS_ASSIGN_OR_RETURN(std::string model, read_file(path));
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.LoadFromSerializedProto(model).ok())
    return corrupt_data("cannot load SentencePiece model " + path + " of dataset " + m.dir +
                        " (the file was replaced or damaged; prepare the dataset again)");
  HfTokenizerFiles out;
  auto piece = [&](int id) { return id >= 0 ? json(sp.IdToPiece(id)) : json(nullptr); };
  if (sp.bos_id() >= 0) out.bos = sp.bos_id();
  if (sp.eos_id() >= 0) out.eos = sp.eos_id();
  // legacy: LlamaTokenizer then encodes with sp.encode and nothing else (no added prefix space);
  // add_bos/eos false: Tessera's encode adds no special tokens.
  const json config = {{"tokenizer_class", "LlamaTokenizer"},
                       {"legacy", true},
                       {"add_bos_token", false},
                       {"add_eos_token", false},
                       {"add_prefix_space", false},
                       {"bos_token", piece(sp.bos_id())},
                       {"eos_token", piece(sp.eos_id())},
                       {"unk_token", piece(sp.unk_id())},
                       {"pad_token", nullptr},
                       {"sp_model_kwargs", json::object()},
                       {"model_max_length", model_max_length},
                       {"clean_up_tokenization_spaces", false}};
  out.files["tokenizer.model"] = std::move(model);
  out.files["tokenizer_config.json"] = config.dump(2) + "\n";
  out.note = "tokenizer: SentencePiece " + m.tokenizer_kind +
             " as tokenizer.model (LlamaTokenizer). On transformers 4.x, AutoTokenizer.from_pretrained(DIR, "
             "use_fast=False) encodes with SentencePiece itself, to the same ids as Tessera; the tokenizer "
             "transformers converts from it (the 4.x default, and always on 5.x) is not guaranteed to (see "
             "docs/usage.md)";
  return out;
}

}  // namespace

Result<HfTokenizerFiles> hf_tokenizer_files(const DatasetManifest& m, int64_t model_max_length) {
  if (m.tokenizer_kind == "byte") return byte_files(model_max_length);
  if (m.tokenizer_kind == "bpe" || m.tokenizer_kind == "unigram" || m.tokenizer_kind == "sentencepiece")
    return sentencepiece_files(m, model_max_length);
  HfTokenizerFiles out;
  out.note = "tokenizer: none written: dataset " + m.dir + " has tokenizer kind '" + m.tokenizer_kind +
             "' (token ids made outside Tessera); add the tokenizer those ids came from to the directory yourself";
  return out;
}

const std::vector<std::string>& hf_tokenizer_file_names() {
  static const std::vector<std::string> names = {"tokenizer.json", "tokenizer.model", "tokenizer_config.json",
                                                 "special_tokens_map.json"};
  return names;
}

}  // namespace tessera
