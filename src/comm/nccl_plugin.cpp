// Finding and loading the NCCL communicator's plugin (nccl_plugin.h).
#include "comm/nccl_plugin.h"

#include "core/plugin_loader.h"

namespace tessera {

bool nccl_plugin_built() {
#ifdef TESSERA_NCCL_PLUGIN_BUILD_PATH
  return true;
#else
  return false;
#endif
}

const NcclPlugin* load_nccl_plugin(std::string* why) {
#ifdef TESSERA_NCCL_PLUGIN_BUILD_PATH
  const char* build_path = TESSERA_NCCL_PLUGIN_BUILD_PATH;
#else
  const char* build_path = nullptr;
#endif
  return plugin_table<NcclPlugin>({"TESSERA_NCCL_PLUGIN", "libtessera_nccl.so", build_path, "tessera_nccl_plugin_v1",
                                   "NCCL and the CUDA runtime"},
                                  nccl_plugin_built(),
                                  "this build has no NCCL communicator (configured without CUDA or NCCL: docs/cuda.md)",
                                  why);
}

}  // namespace tessera
