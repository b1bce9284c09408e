// The process exit codes of every `tessera` command, documented in docs/exit-codes.md. Scripts and
// `tessera launch` tell a preempted run (resume it) from a failed one (look at it) by them.
#pragma once

namespace tessera {

enum class ExitCode : int {
  ok = 0,
  failure = 1,         // anything not listed below (I/O, an internal error)
  usage = 2,           // the command line: unknown command or flag, missing option or file
  cpu_unsupported = 3, // the CPU lacks the build's baseline instruction set (backend/cpu_isa.cpp)
  config = 4,          // the run config or an override is invalid
  data = 5,            // the dataset is missing, damaged or too small for the run
  communication = 6,   // an MPI failure or timeout, a rank that died or hung
  checkpoint = 7,      // a checkpoint is missing, damaged or does not fit the run
  preempted = 75,      // a signal stopped the run after it saved a checkpoint: run again with --resume
};

constexpr int exit_code(ExitCode c) { return static_cast<int>(c); }

}  // namespace tessera
