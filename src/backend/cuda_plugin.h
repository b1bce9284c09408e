// The CUDA backend lives in a plugin, libtessera_cuda.so (src/backend/cuda/), loaded when a run or a
// test asks for it, so that the tessera binary and its Debian package need no CUDA library on
// machines without a GPU. The plugin is built when CMake finds the CUDA toolkit (TESSERA_CUDA).
//
// Where it is looked for, first found wins: $TESSERA_CUDA_PLUGIN; <dir of the executable>/../lib/
// tessera/libtessera_cuda.so (an installed tree); the build tree it was built in.
#pragma once
#include <cstddef>
#include <string>

namespace tessera {

class Backend;

// What the plugin exports (extern "C" tessera_cuda_plugin_v1). Compiled by the same compiler and
// library as the executable, so std::string crosses the line.
struct CudaPlugin {
  const char* architectures;         // what its kernels were compiled for: "sm_90"
  int (*device_count)();             // devices this process sees (0 without a driver: not an error)
  std::string (*device_summary)(int ordinal);  // "NVIDIA H200 (sm_90, 139 GiB)"
  // The backend of device `ordinal`, or nullptr and *error says why. log_rank labels its messages.
  Backend* (*open)(int ordinal, int log_rank, std::string* error);
  // Page-locked host memory kernels can read directly (tests' buffers); free_pinned releases it.
  void* (*allocate_pinned)(size_t bytes);
  void (*free_pinned)(void* p);
};

// True when this build made the plugin (the toolkit was found at configure time).
bool cuda_plugin_built();
// The plugin, loaded at the first call (the process keeps it), or nullptr and *why says why not.
const CudaPlugin* load_cuda_plugin(std::string* why = nullptr);

}  // namespace tessera
