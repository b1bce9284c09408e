// The NCCL communicator lives in a plugin, libtessera_nccl.so (src/comm/nccl/), built with the CUDA
// backend when CMake finds NCCL, and loaded when asked for (core/plugin_loader.h: $TESSERA_NCCL_PLUGIN,
// <bin>/../lib/tessera/, the build tree), so nothing else links NCCL.
#pragma once
#include <string>

namespace tessera {

class Backend;
class Communicator;

struct NcclPlugin {
  // A communicator on NCCL over `bootstrap` (taken: the result owns it, or it is deleted on
  // failure) for buffers in `device`'s memory (the CUDA backend's); nullptr and *error on failure.
  // Collective over the bootstrap communicator.
  Communicator* (*create)(Communicator* bootstrap, Backend& device, std::string* error);
};

bool nccl_plugin_built();
// The plugin, loaded at the first call, or nullptr and *why says why not.
const NcclPlugin* load_nccl_plugin(std::string* why = nullptr);

}  // namespace tessera
