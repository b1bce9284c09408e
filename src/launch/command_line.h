// The job's command line as the launcher sees it: which MPI launcher it uses (mpirun/mpiexec or
// srun), how many ranks it asks for, and the rewrites the launcher makes (rank count, exported
// environment variables) before every start.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::launch {

enum class LauncherKind { mpirun, srun, other };

struct JobCommand {
  std::vector<std::string> argv;
  LauncherKind kind = LauncherKind::other;
  // Index in argv of the mpirun/mpiexec/orterun/srun word (wrappers such as `timeout 600` may come
  // before it); meaningless for `other`.
  size_t launcher_index = 0;
};

// Finds the launcher word (by basename) in `argv`; a command without one is `other` (run as is,
// one process, its rank count cannot be changed).
JobCommand classify_command(std::vector<std::string> argv);

const char* launcher_kind_name(LauncherKind kind);

// The rank count the command asks for (-n/-np/--np/-c N for mpirun; -n/--ntasks N for srun, also
// written -nN or --ntasks=N), or nullopt when it gives none. Only the launcher's own options are
// scanned: scanning stops at the program it runs, so a `-n` of the program is never taken.
// An unparsable count is an error.
Result<std::optional<int>> rank_count(const JobCommand& cmd);

// The command with its rank count set to `ranks`: every rank-count option of the launcher is
// rewritten, or `-n ranks` is inserted after the launcher word when it has none.
Result<JobCommand> with_rank_count(const JobCommand& cmd, int ranks);

// The command with `-x NAME` inserted after the mpirun word for each name (Open MPI forwards only
// the variables named so to ranks on other nodes). srun exports the environment by default, and a
// plain command inherits it: both are returned unchanged.
JobCommand with_exported_env(const JobCommand& cmd, const std::vector<std::string>& names);

// The words joined with shell quoting where needed, for messages and the restart log.
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace tessera::launch
