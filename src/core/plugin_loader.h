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
  const char* build_path;   // where the build made it; nullptr: this build did not make it
  const char* entry;        // the extern "C" function it exports
  const char* needs;        // what it loads, for the error: "the CUDA runtime and cuBLAS"
};

// The address of the plugin's entry function, or why it could not be found or loaded. Each call
// dlopens again (the library is loaded once per process; callers keep what they get).
Result<void*> load_plugin_entry(const PluginSearch& search);

// The table a plugin's entry returns (`const Table* entry()`), looked up once per Table type for the
// process (a loaded library belongs to the process); nullptr and *why when there is none. A search
// without a build path is a build that did not make the plugin: `not_built` is then the reason.
template <class Table>
const Table* plugin_table(const PluginSearch& search, const char* not_built, std::string* why) {
  struct Loaded {
    const Table* table = nullptr;
    std::string why;
  };
  static const Loaded loaded = [&] {
    Loaded l;
    if (!search.build_path) {
      l.why = not_built;
      return l;
    }
    auto entry = load_plugin_entry(search);
    if (!entry.ok()) l.why = entry.status().message();
    else l.table = reinterpret_cast<const Table* (*)()>(entry.value())();
    return l;
  }();
  if (!loaded.table && why) *why = loaded.why;
  return loaded.table;
}

}  // namespace tessera
