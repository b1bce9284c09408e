// tessera checkpoint inspect|convert: (being built, issue 10) reading and converting checkpoints.
#include "cli/commands.h"

namespace tessera::cli {

Runner add_checkpoint(CLI::App& app) {
  app.add_subcommand("checkpoint", "Inspect or convert a checkpoint (not built yet)");
  return [] { return fail("tessera checkpoint is not built yet"); };
}

}  // namespace tessera::cli
