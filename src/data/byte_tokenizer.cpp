// Byte-level tokenizer: the identity between bytes and ids.
#include "data/byte_tokenizer.h"

namespace tessera {

std::vector<uint32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(std::span<const uint32_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (uint32_t id : ids) {
    if (id < 256) out.push_back(static_cast<char>(id));
    else out += "\xEF\xBF\xBD";  // U+FFFD: an id outside the vocabulary
  }
  return out;
}

}  // namespace tessera
