// Device assignment (see device_assignment.h).
#include "backend/device_assignment.h"

#include <string>

namespace tessera {

Result<int> assign_device(NodeRank r, int visible_devices) {
  if (r.ranks_on_node < 1 || r.local_rank < 0 || r.local_rank >= r.ranks_on_node)
    return invalid_argument("device assignment: local rank " + std::to_string(r.local_rank) + " is outside the " +
                            std::to_string(r.ranks_on_node) + " ranks on this machine");
  if (visible_devices < 1)
    return invalid_argument(
        "train.device = \"cuda\": this process sees no CUDA device (no GPU, no driver, or CUDA_VISIBLE_DEVICES "
        "hides them); use train.device = \"cpu\" or run where a GPU is");
  return r.local_rank % visible_devices;
}

}  // namespace tessera
