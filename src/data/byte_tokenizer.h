// Byte-level tokenizer: vocabulary 256, token id = byte value. Needs no training and no file.
#pragma once
#include "data/tokenizer.h"

namespace tessera {

class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<uint32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const uint32_t> ids) const override;
  uint32_t vocab_size() const override { return 256; }
  std::string kind() const override { return "byte"; }
  std::string spec() const override { return "byte-level, vocab 256"; }
};

}  // namespace tessera
