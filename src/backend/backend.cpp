// Devices by name, and the backend for a device (the backends this build has).
#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda_plugin.h"
#include "core/log.h"

namespace tessera {

std::string_view device_name(Device d) { return d == Device::cuda ? "cuda" : "cpu"; }

Result<Device> parse_device(std::string_view name) {
  if (name == "cpu") return Device::cpu;
  if (name == "cuda") return Device::cuda;
  return invalid_argument("the device must be \"cpu\" or \"cuda\" (got \"" + std::string(name) + "\")");
}

std::string cuda_build_summary() {
  if (!cuda_plugin_built()) return "CUDA off";
  std::string why;
  const CudaPlugin* cuda = load_cuda_plugin(&why);
  if (!cuda) return "CUDA built, not loadable: " + why;
  const std::string arch = std::string("CUDA on (") + cuda->architectures + ")";
  return cuda->device_count() > 0 ? arch + "; device 0: " + cuda->device_summary(0) : arch + "; no CUDA device visible";
}

Result<std::unique_ptr<Backend>> make_backend(Device device, NodeRank rank) {
  if (device == Device::cpu) return std::unique_ptr<Backend>(std::make_unique<CpuBackend>());
  std::string why;
  const CudaPlugin* cuda = load_cuda_plugin(&why);
  if (!cuda)
    return invalid_argument("train.device = \"cuda\": " + why + "; use train.device = \"cpu\"");
  TS_ASSIGN_OR_RETURN(const int ordinal, assign_device(rank, cuda->device_count()));
  Backend* be = cuda->open(ordinal, log_rank(), &why);
  if (!be) return invalid_argument(why);
  return std::unique_ptr<Backend>(be);
}

}  // namespace tessera
