// Finding and loading the NCCL communicator's plugin (nccl_plugin.h).
#include "comm/nccl_plugin.h"

#include "core/plugin_loader.h"

namespace tessera {
namespace {

#ifdef TESSERA_NCCL_PLUGIN_BUILD_PATH
constexpr const char* kBuildPath = TESSERA_NCCL_PLUGIN_BUILD_PATH;
#else
constexpr const char* kBuildPath = nullptr;  // configured without it
#endif

}  // namespace

bool nccl_plugin_built() { return kBuildPath != nullptr; }

const NcclPlugin* load_nccl_plugin(std::string* why) {
  const PluginSearch search{"TESSERA_NCCL_PLUGIN", "libtessera_nccl.so", kBuildPath, "tessera_nccl_plugin_v1",
                            "NCCL and the CUDA runtime"};
  return plugin_table<NcclPlugin>(
      search, "this build has no NCCL communicator (configured without CUDA or NCCL: docs/cuda.md)", why);
}

}  // namespace tessera
