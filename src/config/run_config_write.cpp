// Writing a resolved RunConfig from its schema rows: as TOML (the run directory's config.toml, which parses
// back to an equal config) and as JSON (checkpoints, agreement hashes, comparisons).
#include <charconv>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "config/run_config.h"
#include "config/run_config_schema.h"

namespace tessera {
namespace {

// Shortest round-trip decimal forms, so 3e-4f prints as 0.0003.
template <typename Float>
std::string toml_number(Float v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, p);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

std::string toml_literal(bool v) { return v ? "true" : "false"; }
std::string toml_literal(float v) { return toml_number(v); }
std::string toml_literal(double v) { return toml_number(v); }
std::string toml_literal(const std::string& v) {
  std::string out = "\"";
  for (unsigned char c : v) {
    if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else out += static_cast<char>(c);
  }
  return out + "\"";
}

std::string toml_literal(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::string RunConfig::to_toml() const {
  std::string s = "# Resolved run configuration (every key explicit; grad_accum = " + std::to_string(train.grad_accum) +
                  ").\n";
  bool first = true;
  for (const SectionSpec& sec : run_config_schema()) {
    s += (first ? "[" : "\n[") + std::string(sec.name) + "]\n";
    first = false;
    for (const KeySpec& key : sec.keys)
      if (key.value.in_toml) s += std::string(key.name) + " = " + key.value.toml(*this) + "\n";
  }
  return s;
}

nlohmann::json to_json(const RunConfig& c) {
  nlohmann::json j;
  for (const SectionSpec& sec : run_config_schema()) {
    nlohmann::json& section = j[std::string(sec.name)];
    for (const KeySpec& key : sec.keys) section[std::string(key.name)] = key.value.json(c);
  }
  return j;
}

bool RunConfig::operator==(const RunConfig& other) const { return to_json(*this) == to_json(other); }

}  // namespace tessera
