// The NCCL plugin's entry point (comm/nccl_plugin.h).
#include <memory>
#include <string>

#include "comm/nccl/nccl_communicator.h"
#include "comm/nccl_plugin.h"

namespace tessera {
namespace {

Communicator* create(Communicator* bootstrap, Backend& device, std::string* error) {
  auto c = NcclCommunicator::create(std::unique_ptr<Communicator>(bootstrap), device);
  if (!c.ok()) {
    if (error) *error = c.status().message();
    return nullptr;
  }
  return std::move(c).value().release();
}

const NcclPlugin kPlugin{create};

}  // namespace
}  // namespace tessera

extern "C" __attribute__((visibility("default"))) const tessera::NcclPlugin* tessera_nccl_plugin_v1() {
  return &tessera::kPlugin;
}
