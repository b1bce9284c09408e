// Finding and loading the NCCL communicator's plugin (nccl_plugin.h).
#include "comm/nccl_plugin.h"

#include <mutex>

#include "core/plugin_loader.h"

namespace tessera {
namespace {

struct Loaded {
  const NcclPlugin* plugin = nullptr;
  std::string why;
};

Loaded load() {
  Loaded l;
  if (!nccl_plugin_built()) {
    l.why = "this build has no NCCL communicator (configured without CUDA or NCCL: docs/cuda.md)";
    return l;
  }
#ifdef TESSERA_NCCL_PLUGIN_BUILD_PATH
  const char* build_path = TESSERA_NCCL_PLUGIN_BUILD_PATH;
#else
  const char* build_path = nullptr;
#endif
  auto entry = load_plugin_entry(
      {"TESSERA_NCCL_PLUGIN", "libtessera_nccl.so", build_path, "tessera_nccl_plugin_v1", "NCCL and the CUDA runtime"});
  if (!entry.ok()) {
    l.why = "the NCCL communicator: " + entry.status().message();
    return l;
  }
  l.plugin = reinterpret_cast<const NcclPlugin* (*)()>(entry.value())();
  return l;
}

}  // namespace

bool nccl_plugin_built() {
#ifdef TESSERA_NCCL_PLUGIN_BUILD_PATH
  return true;
#else
  return false;
#endif
}

const NcclPlugin* load_nccl_plugin(std::string* why) {
  static std::once_flag once;  // a loaded library belongs to the process
  static Loaded loaded;
  std::call_once(once, [] { loaded = load(); });
  if (!loaded.plugin && why) *why = loaded.why;
  return loaded.plugin;
}

}  // namespace tessera
