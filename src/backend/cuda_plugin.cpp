// Finding and loading the CUDA backend's plugin (cuda_plugin.h).
#include "backend/cuda_plugin.h"

#include "core/plugin_loader.h"

namespace tessera {

bool cuda_plugin_built() {
#ifdef TESSERA_CUDA_PLUGIN_BUILD_PATH
  return true;
#else
  return false;
#endif
}

const CudaPlugin* load_cuda_plugin(std::string* why) {
#ifdef TESSERA_CUDA_PLUGIN_BUILD_PATH
  const char* build_path = TESSERA_CUDA_PLUGIN_BUILD_PATH;
#else
  const char* build_path = nullptr;
#endif
  return plugin_table<CudaPlugin>({"TESSERA_CUDA_PLUGIN", "libtessera_cuda.so", build_path, "tessera_cuda_plugin_v1",
                                   "the CUDA runtime and cuBLAS"},
                                  cuda_plugin_built(),
                                  "this build has no CUDA backend (configured without the CUDA toolkit: see "
                                  "TESSERA_CUDA in docs/cuda.md)",
                                  why);
}

}  // namespace tessera
