// Finding and loading the CUDA backend's plugin (cuda_plugin.h).
#include "backend/cuda_plugin.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

namespace tessera {
namespace {

std::vector<std::string> candidate_paths() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("TESSERA_CUDA_PLUGIN"); env && *env) out.emplace_back(env);
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    out.push_back((std::filesystem::path(exe).parent_path() / ".." / "lib" / "tessera" / "libtessera_cuda.so").string());
  }
#ifdef TESSERA_CUDA_PLUGIN_BUILD_PATH
  out.emplace_back(TESSERA_CUDA_PLUGIN_BUILD_PATH);
#endif
  return out;
}

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
  for (const std::string& path : candidate_paths()) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) continue;
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* err = dlerror();
      l.why = "the CUDA backend's plugin " + path + " does not load: " + (err ? err : "?") +
              " (the CUDA runtime and cuBLAS must be on the library path)";
      return l;
    }
    using Entry = const CudaPlugin* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(handle, "tessera_cuda_plugin_v1"));
    if (!entry) {
      l.why = path + " is not a Tessera CUDA plugin (no tessera_cuda_plugin_v1)";
      return l;
    }
    l.plugin = entry();
    return l;
  }
  l.why = "the CUDA backend's plugin libtessera_cuda.so was not found (set TESSERA_CUDA_PLUGIN to its path)";
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
