// Helpers for the data tests: the shared TempDir and file helpers (../test_util.h) and a generated corpus.
#pragma once
#include <cstdint>
#include <string>

#include "../test_util.h"

namespace tessera::testing {

// Deterministic English-like text of about `bytes` bytes, one sentence per line, from a small
// word list (a small alphabet keeps a tiny SentencePiece vocabulary trainable).
inline std::string generated_corpus(size_t bytes, uint64_t seed = 7) {
  static const char* words[] = {"the", "of", "and", "to", "in", "that", "he", "said", "unto", "lord",
                                "god", "shall", "land", "people", "king", "house", "day", "son", "for", "with",
                                "his", "them", "upon", "all", "they", "came", "went", "heaven", "earth", "water"};
  std::string s;
  uint64_t x = seed;
  while (s.size() < bytes) {
    int n = 4 + static_cast<int>((x >> 33) % 12);
    for (int i = 0; i < n; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      if (i) s += ' ';
      s += words[(x >> 33) % 30];
    }
    s += ".\n";
  }
  return s;
}

}  // namespace tessera::testing
