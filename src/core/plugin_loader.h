// Finding and loading a plugin of this build (a shared library the executable dlopens only when a
// run asks for it, so nothing else links its dependencies: the CUDA backend, the NCCL communicator).
// Looked for, first found wins: $<env_var>; <dir of the executable>/../lib/tessera/<file_name> (an
// installed tree); the build tree it was built in (build_path, may be null).
#pragma once
#include <string>

#include "core/status.h"

namespace tessera {

struct PluginSearch {
  const char* env_var;      // "TESSERA_CUDA_PLUGIN"
  const char* file_name;    // "libtessera_cuda.so"
  const char* build_path;   // where the build made it, or nullptr
  const char* entry;        // the extern "C" function it exports
  const char* needs;        // what it loads, for the error: "the CUDA runtime and cuBLAS"
};

// The address of the plugin's entry function, or why it could not be found or loaded. Each call
// dlopens again (the library is loaded once per process; callers keep what they get).
Result<void*> load_plugin_entry(const PluginSearch& search);

}  // namespace tessera
