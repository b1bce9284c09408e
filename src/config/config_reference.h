// The config reference (docs/config-reference.md) generated from the run config's schema, so the
// documented keys, types, defaults and resume behaviour cannot drift from what the parser accepts.
#pragma once
#include <string>

namespace tessera {

// Markdown: one table per section, one row per TOML key (key, type, default, on --resume, meaning).
std::string config_reference_markdown();

}  // namespace tessera
