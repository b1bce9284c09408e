// Markdown tables from run_config_schema(): what `tessera config reference` prints.
#include "config/config_reference.h"

#include "config/run_config_schema.h"

namespace tessera {
namespace {

// A table cell: '|' would end the cell, a newline the row.
std::string cell(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

}  // namespace

std::string config_reference_markdown() {
  const RunConfig defaults;
  std::string md =
      "# Config reference\n\n"
      "Generated from the schema (`src/config/run_config_schema.cpp`) by `tessera config reference`;\n"
      "the test `cli_config_reference` fails when this file is stale. Regenerate it with\n"
      "`./build/src/cli/tessera config reference > docs/config-reference.md`.\n\n"
      "Every key goes in its `[section]` of the TOML file, or on the command line as `section.key=value`.\n"
      "Defaults are those of an empty config (the `[model]` values are the default preset's; a\n"
      "`model.preset` replaces them). \"warns\" under *--resume*: changing the key when resuming makes\n"
      "the run differ from the uninterrupted one, and the trainer says so. The guide is\n"
      "[config.md](config.md).\n";
  for (const SectionSpec& sec : run_config_schema()) {
    md += "\n## [" + std::string(sec.name) + "]\n\n";
    md += "| Key | Type | Default | --resume | Meaning |\n|---|---|---|---|---|\n";
    for (const KeySpec& k : sec.keys) {
      if (!k.value.in_toml) continue;  // written to the JSON form only (derived by resolution code)
      md += "| `" + std::string(sec.name) + "." + std::string(k.name) + "` | " + key_type_name(k.value.type) +
            " | `" + cell(k.value.toml(defaults)) + "` | " + (k.on_resume == OnResume::warn ? "warns" : "ok") +
            " | " + cell(std::string(k.doc)) + " |\n";
    }
  }
  return md;
}

}  // namespace tessera
