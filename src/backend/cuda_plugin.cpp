// Finding and loading the CUDA backend's plugin (cuda_plugin.h).
#include "backend/cuda_plugin.h"

#include "core/plugin_loader.h"

namespace tessera {
namespace {

#ifdef TESSERA_CUDA_PLUGIN_BUILD_PATH
constexpr const char* kBuildPath = TESSERA_CUDA_PLUGIN_BUILD_PATH;
#else
constexpr const char* kBuildPath = nullptr;  // configured without it
#endif

}  // namespace

bool cuda_plugin_built() { return kBuildPath != nullptr; }

const CudaPlugin* load_cuda_plugin(std::string* why) {
  const PluginSearch search{"TESSERA_CUDA_PLUGIN", "libtessera_cuda.so", kBuildPath, "tessera_cuda_plugin_v1",
                            "the CUDA runtime and cuBLAS"};
  return plugin_table<CudaPlugin>(
      search, "this build has no CUDA backend (configured without the CUDA toolkit: see TESSERA_CUDA in docs/cuda.md)",
      why);
}

}  // namespace tessera
