// The plugin's entry point (backend/cuda_plugin.h): the CudaBackend and the device queries, behind
// plain function pointers the executable finds with dlsym.
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda_plugin.h"
#include "core/log.h"

namespace tessera {
namespace {

Backend* open_backend(int ordinal, int rank, std::string* error) {
  set_log_rank(rank);  // this library has its own copy of core's rank label
  auto be = CudaBackend::open(ordinal);
  if (!be.ok()) {
    if (error) *error = be.status().message();
    return nullptr;
  }
  return std::move(be).value().release();
}

void* allocate_pinned(size_t bytes) {
  void* p = nullptr;
  return cudaMallocHost(&p, bytes == 0 ? 1 : bytes) == cudaSuccess ? p : nullptr;
}

void free_pinned(void* p) { cudaFreeHost(p); }  // waits for the device: no kernel reads freed memory

const CudaPlugin kPlugin{
    TESSERA_CUDA_ARCHITECTURES, cuda_device_count, cuda_device_summary, open_backend, allocate_pinned, free_pinned,
};

}  // namespace
}  // namespace tessera

extern "C" __attribute__((visibility("default"))) const tessera::CudaPlugin* tessera_cuda_plugin_v1() {
  return &tessera::kPlugin;
}
