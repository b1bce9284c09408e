#include "reachable_memory.h"

#include <new>

#include "backend/cuda_plugin.h"

namespace tessera {
namespace {

// Page-locked host memory from the CUDA plugin, mapped into the device's address space (unified
// addressing), so kernels dereference it directly; freeing it waits for the device.
class PinnedMemory final : public std::pmr::memory_resource {
 public:
  explicit PinnedMemory(const CudaPlugin& cuda) : cuda_(cuda) {}

 private:
  void* do_allocate(size_t bytes, size_t) override {
    void* p = cuda_.allocate_pinned(bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void do_deallocate(void* p, size_t, size_t) override { cuda_.free_pinned(p); }
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override { return this == &o; }
  const CudaPlugin& cuda_;
};

}  // namespace

std::pmr::memory_resource* reachable_memory(const Backend& be) {
  if (be.device() == Device::cuda) {
    const CudaPlugin* cuda = load_cuda_plugin();
    if (cuda) {
      static PinnedMemory pinned(*cuda);  // stateless past the plugin: one for the test process
      return &pinned;
    }
  }
  return std::pmr::new_delete_resource();
}

}  // namespace tessera
