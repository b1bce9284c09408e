// A dataset's tokenizer as Hugging Face tokenizer files, where one maps exactly:
//   byte                      tokenizer.json: byte-level BPE over the 256 bytes with no merges
//                             (id = byte value), loaded by PreTrainedTokenizerFast
//   bpe, unigram, sentencepiece   tokenizer.model (the SentencePiece file itself) with a
//                             tokenizer_config.json naming the slow LlamaTokenizer in legacy mode,
//                             which encodes with the SentencePiece library: the same ids as Tessera
//   external (imported shards)    nothing: Tessera never saw the tokenizer
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/manifest.h"

namespace tessera {

struct HfTokenizerFiles {
  std::map<std::string, std::string> files;  // file name in the export directory -> contents
  std::optional<int64_t> bos, eos;           // special ids the tokenizer defines
  std::string note;                          // what was (or was not) written and how to load it
};

// model_max_length: the model's context, recorded in tokenizer_config.json.
Result<HfTokenizerFiles> hf_tokenizer_files(const DatasetManifest& m, int64_t model_max_length);

// Every file name hf_tokenizer_files may write, so a forced re-export removes stale ones (a
// tokenizer.json left from a byte-tokenized export would shadow a new tokenizer.model).
const std::vector<std::string>& hf_tokenizer_file_names();

}  // namespace tessera
