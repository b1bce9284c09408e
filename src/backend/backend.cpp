// Devices by name, and the backend for a device (the backends this build has).
#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"

namespace tessera {

std::string_view device_name(Device d) { return d == Device::cuda ? "cuda" : "cpu"; }

Result<Device> parse_device(std::string_view name) {
  if (name == "cpu") return Device::cpu;
  if (name == "cuda") return Device::cuda;
  return invalid_argument("the device must be \"cpu\" or \"cuda\" (got \"" + std::string(name) + "\")");
}

Result<std::unique_ptr<Backend>> make_backend(Device device) {
  if (device == Device::cpu) return std::unique_ptr<Backend>(std::make_unique<CpuBackend>());
  return invalid_argument(
      "train.device = \"cuda\": this build has no CUDA backend (`tessera --version` says \"CUDA off\"; the CUDA "
      "backend is not written yet); use train.device = \"cpu\"");
}

}  // namespace tessera
