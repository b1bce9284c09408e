// Input discovery for prepare (files and directories, recursively, sorted) and the default corpus
// (the King James Bible from Debian's bible-kjv package, no download needed).
#pragma once
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera {

struct InputFile {
  std::string path;
  uint64_t bytes = 0;
};

// Each input is a file or a directory (all regular files below it, recursively). The result is
// sorted by path, duplicates removed, and files under any `exclude_dir` skipped (prepare's output).
Result<std::vector<InputFile>> collect_input_files(const std::vector<std::string>& inputs,
                                                    const std::string& exclude_dir = "");

// Runs `bible -f "Gen1:1-Rev22:21"` and returns its output (about 4.4 MB, well under a second).
Result<std::string> default_corpus_text();
// Writes default_corpus_text() to path (atomically), for use as a prepare input.
Status write_default_corpus(const std::string& path);

}  // namespace tessera
