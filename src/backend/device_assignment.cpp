// Device assignment (see device_assignment.h).
#include "backend/device_assignment.h"

#include <string>

namespace tessera {

Result<int> assign_device(const DevicePlacement& p) {
  if (p.ranks_on_node < 1 || p.local_rank < 0 || p.local_rank >= p.ranks_on_node)
    return invalid_argument("device assignment: local rank " + std::to_string(p.local_rank) + " is outside the " +
                            std::to_string(p.ranks_on_node) + " ranks on this machine");
  if (p.visible_devices < 1)
    return invalid_argument(
        "train.device = \"cuda\": this process sees no CUDA device (no GPU, no driver, or CUDA_VISIBLE_DEVICES "
        "hides them); use train.device = \"cpu\" or run where a GPU is");
  return p.local_rank % p.visible_devices;
}

}  // namespace tessera
