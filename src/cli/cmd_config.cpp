// tessera config reference: the config reference (every key of the schema, then the refused
// combinations) as Markdown on stdout.
#include <cstdio>

#include "cli/commands.h"
#include "config/config_reference.h"
#include "plan/refusals.h"

namespace tessera::cli {

Runner add_config(CLI::App& app) {
  CLI::App* c = app.add_subcommand("config", "Describe the run config");
  c->add_subcommand("reference", "Print every config key (type, default, meaning) and the refused combinations as Markdown");
  c->require_subcommand(1);  // "reference" is the only one
  return [] {
    const std::string md = config_reference_markdown() + "\n" + refusals_markdown();
    std::fwrite(md.data(), 1, md.size(), stdout);
    return 0;
  };
}

}  // namespace tessera::cli
