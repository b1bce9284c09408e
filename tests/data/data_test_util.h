// Helpers for the data tests: a self-removing temporary directory and small file utilities.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace tessera::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera_data_XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    if (!p) std::abort();
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

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
