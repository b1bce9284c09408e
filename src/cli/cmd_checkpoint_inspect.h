// Parts of `tessera checkpoint` shared by its subcommands: resolving the checkpoint a path names,
// and `inspect` itself.
#pragma once
#include <string>

#include "core/status.h"

namespace tessera::cli {

struct CheckpointArg {
  std::string dir;  // the step_<n> directory
  std::string run;  // the run directory it was found in by "latest complete", else empty
};

// `path`: a checkpoint directory (holds manifest.json or COMPLETE), or a run directory (holds
// checkpoints/; its latest complete checkpoint).
Result<CheckpointArg> resolve_checkpoint_arg(const std::string& path);

struct InspectOptions {
  std::string path;
  bool json = false;
  bool quiet = false;  // no progress lines
};
int run_checkpoint_inspect(const InspectOptions& o);

}  // namespace tessera::cli
