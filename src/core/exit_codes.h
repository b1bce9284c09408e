// The process exit codes of every `tessera` command, documented in docs/exit-codes.md. Scripts and
// `tessera launch` tell a preempted run (resume it) from a failed one (look at it) by them.
#pragma once
#include "core/status.h"

namespace tessera {

enum class ExitCode : int {
  ok = 0,
  failure = 1,         // anything not listed below (I/O, an internal error)
  usage = 2,           // the command line: unknown command or flag, missing option or file
  cpu_unsupported = 3, // the CPU lacks the build's baseline instruction set (backend/cpu_isa.cpp)
  config = 4,          // a setting is invalid: the run config, an override, a layout the job cannot run
  data = 5,            // a file is missing, damaged or cannot be written: the dataset, a checkpoint, the run directory
  communication = 6,   // an MPI failure or timeout, a rank that died or hung (or a PS run finished without one and no spare took its place)
  preempted = 75,      // a signal stopped the run after it saved a checkpoint: run again with --resume
};

constexpr int exit_code(ExitCode c) { return static_cast<int>(c); }

// The exit code of a command that failed with `s`: the error's kind decides.
inline int exit_code_for(const Status& s) {
  switch (s.code()) {
    case StatusCode::ok: return exit_code(ExitCode::ok);
    case StatusCode::invalid_argument: return exit_code(ExitCode::config);
    case StatusCode::not_found:
    case StatusCode::io_error:
    case StatusCode::corrupt_data: return exit_code(ExitCode::data);
    case StatusCode::comm_error:
    case StatusCode::timeout: return exit_code(ExitCode::communication);
    case StatusCode::internal: break;
  }
  return exit_code(ExitCode::failure);
}

}  // namespace tessera
