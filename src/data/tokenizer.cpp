// Tokenizer factory: from a manifest's tokenizer kind and model file to a ready tokenizer.
#include "data/tokenizer.h"

#include "data/byte_tokenizer.h"
#include "data/sentencepiece_tokenizer.h"

namespace tessera {

Result<std::unique_ptr<Tokenizer>> open_tokenizer(const std::string& kind, const std::string& model_path) {
  if (kind == "byte") return std::unique_ptr<Tokenizer>(std::make_unique<ByteTokenizer>());
  if (kind == "bpe" || kind == "unigram" || kind == "sentencepiece") {
    if (model_path.empty())
      return invalid_argument("tokenizer kind '" + kind + "' needs a SentencePiece .model file");
    TS_ASSIGN_OR_RETURN(auto sp, SentencePieceTokenizer::load(model_path, kind));
    return std::unique_ptr<Tokenizer>(std::move(sp));
  }
  if (kind == "external")
    return invalid_argument("this dataset was imported from shards tokenized outside Tessera, which has no "
                            "tokenizer for them: pass --data with a dataset made by `tessera prepare`");
  return invalid_argument("unknown tokenizer kind '" + kind + "': use byte, bpe, unigram or sentencepiece");
}

}  // namespace tessera
