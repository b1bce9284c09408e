// Finding and loading the CUDA backend's plugin (cuda_plugin.h).
#include "backend/cuda_plugin.h"

#include <mutex>

#include "core/plugin_loader.h"

namespace tessera {
namespace {

struct Loaded {
  const CudaPlugin* plugin = nullptr;
  std::string why;
};

Loaded load() {
  Loaded l;
  if (!cuda_plugin_built()) {
    l.why = "this build has no CUDA backend (configured without the CUDA toolkit: see TESSERA_CUDA in docs/cuda.md)";
    return l;
  }
#ifdef TESSERA_CUDA_PLUGIN_BUILD_PATH
  const char* build_path = TESSERA_CUDA_PLUGIN_BUILD_PATH;
#else
  const char* build_path = nullptr;
#endif
  auto entry = load_plugin_entry(
      {"TESSERA_CUDA_PLUGIN", "libtessera_cuda.so", build_path, "tessera_cuda_plugin_v1", "the CUDA runtime and cuBLAS"});
  if (!entry.ok()) {
    l.why = "the CUDA backend: " + entry.status().message();
    return l;
  }
  l.plugin = reinterpret_cast<const CudaPlugin* (*)()>(entry.value())();
  return l;
}

}  // namespace

bool cuda_plugin_built() {
#ifdef TESSERA_CUDA_PLUGIN_BUILD_PATH
  return true;
#else
  return false;
#endif
}

const CudaPlugin* load_cuda_plugin(std::string* why) {
  // A loaded library belongs to the process; loading it once is what dlopen would do anyway.
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = load(); });
  if (!loaded.plugin && why) *why = loaded.why;
  return loaded.plugin;
}

}  // namespace tessera
