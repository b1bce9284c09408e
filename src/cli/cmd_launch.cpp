// tessera launch: (being built, issue 10) the elastic launcher.
#include "cli/commands.h"

namespace tessera::cli {

Runner add_launch(CLI::App& app) {
  app.add_subcommand("launch", "Run an mpirun/srun job, restarting it from checkpoints (not built yet)");
  return [] { return fail("tessera launch is not built yet"); };
}

}  // namespace tessera::cli
