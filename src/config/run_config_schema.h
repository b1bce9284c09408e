// The run config's schema: one row per key (section, name, where it lives in RunConfig, checks, whether a
// change on --resume alters training). Parsing, TOML/JSON writing and the resume check all read these rows.
#pragma once
#include <concepts>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/run_config.h"

namespace tessera {

// integer_list: a TOML array of integers (parallel.stage_layers = [2, 3, 3]); an override writes it
// "[2,3,3]" or "2,3,3" ("[]" for the empty list).
enum class KeyType { integer, floating, boolean, string, integer_list };
// As error messages say it: "integer", "float", "boolean", "string", "array of integers".
const char* key_type_name(KeyType t);

// A key's value as TOML or an override gives it (an integer for a float key already widened to double).
using KeyValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>>;

// A rule on a key's value: "" when it holds, else the message that follows the key's location,
// e.g. " must be >= 1 (got 0)" after "cfg.toml:7: train.steps".
using KeyCheck = std::function<std::string(const KeyValue&)>;

// Where a key's value lives in RunConfig and how it converts. Made in run_config_schema.cpp by
// field() (a member), enum_field() (an enum written by name), derived() and computed() (JSON only).
struct KeyBinding {
  KeyType type = KeyType::integer;
  bool in_toml = true;  // false: set by resolution code and written to the JSON form only (grad_accum)
  std::function<KeyValue(const KeyValue&)> normalize;             // as the member holds it (floats rounded)
  std::function<std::string(RunConfig&, const KeyValue&)> store;  // "" or an error tail, as KeyCheck
  std::function<std::string(const RunConfig&)> toml;             // the TOML literal
  std::function<nlohmann::json(const RunConfig&)> json;
};

// Whether a changed value on --resume makes the run differ from the uninterrupted one.
enum class OnResume { ok, warn };

struct KeySpec {
  std::string_view name;
  KeyBinding value;
  OnResume on_resume = OnResume::ok;
  std::vector<KeyCheck> checks;  // run in order on the normalized value before it is stored
  std::string_view doc;

  // Checks then stores a value of the key's type; returns "" or an error tail (see KeyCheck).
  std::string assign(RunConfig& cfg, const KeyValue& raw) const;
};

struct SectionSpec {
  std::string_view name;
  std::vector<KeySpec> keys;  // TOML keys in the order to_toml writes them, plus JSON-only ones
};

// Sections in TOML order: model, data, train, optim, parallel.
const std::vector<SectionSpec>& run_config_schema();
const SectionSpec* find_section(std::string_view name);
// A key that may appear in TOML (in_toml); nullptr for unknown and JSON-only keys.
const KeySpec* find_key(const SectionSpec& sec, std::string_view name);
std::vector<std::string_view> section_names();
std::vector<std::string_view> key_names(const SectionSpec& sec);  // TOML keys only

// TOML literals (defined in run_config_write.cpp): numbers in their shortest round-trip form, so 3e-4f
// prints as 0.0003 and a whole float keeps a ".0"; strings quoted and escaped.
template <std::integral T>
  requires(!std::same_as<T, bool>)
std::string toml_literal(T v) {
  return std::to_string(v);
}
std::string toml_literal(bool v);
std::string toml_literal(float v);
std::string toml_literal(double v);
std::string toml_literal(const std::string& v);
std::string toml_literal(const std::vector<int64_t>& v);  // "[2, 3, 3]", "[]"

// "; did you mean 'x'?" when a candidate is close enough to `word` to be a plausible typo, else ""
// (defined in run_config.cpp; unknown keys and sections, and names such as parallel.schedule use it).
std::string did_you_mean(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace tessera
