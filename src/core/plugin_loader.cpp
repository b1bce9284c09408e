#include "core/plugin_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <vector>

namespace tessera {

Result<void*> load_plugin_entry(const PluginSearch& s) {
  std::vector<std::string> paths;
  if (const char* env = std::getenv(s.env_var); env && *env) paths.emplace_back(env);
  char exe[PATH_MAX];
  if (const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1); n > 0) {
    exe[n] = '\0';
    paths.push_back((std::filesystem::path(exe).parent_path() / ".." / "lib" / "tessera" / s.file_name).string());
  }
  if (s.build_path) paths.emplace_back(s.build_path);
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) continue;
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* err = dlerror();
      return not_found("the plugin " + path + " does not load: " + (err ? err : "?") + " (" + s.needs +
                       " must be on the library path)");
    }
    void* entry = dlsym(handle, s.entry);
    if (!entry) return not_found(path + " is not the plugin it should be (no " + s.entry + ")");
    return entry;
  }
  return not_found(std::string("the plugin ") + s.file_name + " was not found (set " + s.env_var + " to its path)");
}

}  // namespace tessera
