// Slots file parsing: a bare count or an Open MPI hostfile.
#include "launch/slots.h"

#include <charconv>
#include <sstream>
#include <vector>

#include "core/file_util.h"

namespace tessera::launch {
namespace {

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// A whole token as a non-negative int, or -1.
int parse_count(std::string_view s) {
  int v = -1;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return -1;
  return v;
}

}  // namespace

Result<int> parse_slots(std::string_view text, const std::string& source) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (!line.empty()) lines.push_back(line);
    start = end + 1;
  }
  if (lines.empty())
    return invalid_argument("slots file " + source + " is empty: write a number of slots (e.g. '4') or Open MPI " +
                            "hostfile lines ('node1 slots=4')");
  if (lines.size() == 1 && lines[0].find_first_not_of("-0123456789") == std::string_view::npos) {
    const int n = parse_count(lines[0]);
    if (n < 0) return invalid_argument("slots file " + source + ": '" + std::string(lines[0]) + "' is not a count");
    return n;
  }
  int total = 0;
  for (std::string_view line : lines) {
    std::istringstream words{std::string(line)};
    std::string host, word;
    words >> host;
    int slots = 1;
    while (words >> word) {
      if (word.rfind("slots=", 0) != 0) continue;  // max_slots= and other keys do not add slots
      slots = parse_count(std::string_view(word).substr(6));
      if (slots < 0)
        return invalid_argument("slots file " + source + ": bad '" + word + "' on line '" + std::string(line) +
                                "' (want slots=<non-negative integer>)");
    }
    if (host.find('=') != std::string::npos)
      return invalid_argument("slots file " + source + ": line '" + std::string(line) +
                              "' has no host name before its keys (want 'host slots=N')");
    total += slots;
  }
  return total;
}

Result<int> read_slots_file(const std::string& path) {
  TS_ASSIGN_OR_RETURN(std::string text, read_file(path));
  return parse_slots(text, path);
}

}  // namespace tessera::launch
