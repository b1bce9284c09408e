// CudaBackend: the ops of backend/ops.h on one GPU (cuda_kernels.h: cuBLAS for the matmuls, our own
// kernels for the rest), on two streams the backend owns (compute and communication), with device
// memory counted by category. The CPU backend is its oracle (tests/backend/cross_backend_ops_test.cpp).
//
// Memory: one cudaMalloc per buffer. Buffers are allocated at set-up and live for the run, so a
// caching pool would only matter for ZeRO-3's "free after use", which still runs through host-style
// paged buffers (Residency::paged is resident here).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/cuda/cuda_kernels.h"

namespace tessera {

// How many CUDA devices this process sees (0 without a driver or a device: never an error).
int cuda_device_count();
// "NVIDIA H200 (sm_90, 139 GiB)" of device `ordinal`, or why there is none.
std::string cuda_device_summary(int ordinal = 0);

class CudaBackend final : public Backend, private ExternalMemory {
 public:
  // The backend of device `ordinal` of this process (its current device from now on). Fails with a
  // message naming the problem when there is no such device.
  static Result<std::unique_ptr<CudaBackend>> open(int ordinal = 0);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device::cuda; }

#define TESSERA_CUDA_WITH_LAUNCH(...) (launch() __VA_OPT__(, ) __VA_ARGS__)
#define TESSERA_CUDA_BACKEND_OP(name, ret, params, args) \
  ret name params override {                             \
    const LaunchCheck check_(*this, #name);               \
    return cuda::name TESSERA_CUDA_WITH_LAUNCH args;     \
  }
  TESSERA_BACKEND_OPS(TESSERA_CUDA_BACKEND_OP)
#undef TESSERA_CUDA_BACKEND_OP
#undef TESSERA_CUDA_WITH_LAUNCH

  void copy_to_device(void* device, const void* host, size_t bytes) override;
  void copy_to_host(void* host, const void* device, size_t bytes) override;
  bool is_device_memory(const void* p) const override;
  void synchronize() override;

  Buffer allocate(size_t bytes, MemCategory category, Residency residency = Residency::resident) override;
  MemoryStats memory_counters() const override { return counters_.stats(); }

  Stream set_stream(Stream s) override;
  Event record_event(Stream s) override;
  void wait_event(Stream waiter, Event e) override;
  void synchronize_event(Event e) override;

  int ordinal() const { return ordinal_; }

 private:
  class Scratch;
  // After an op's launches: a launch error (bad configuration, a kernel that cannot run here) names
  // the op. Errors inside a kernel surface at the next synchronisation, which names itself.
  class LaunchCheck {
   public:
    LaunchCheck(CudaBackend& be, const char* op) : be_(be), op_(op) {}
    ~LaunchCheck() { be_.check_launch(op_); }

   private:
    CudaBackend& be_;
    const char* op_;
  };

  explicit CudaBackend(int ordinal);
  cuda::Launch launch();
  void check_launch(const char* op);
  cudaStream_t stream(Stream s) const { return streams_[static_cast<int>(s)]; }

  // ExternalMemory: the buffers' device memory.
  void release(void* data, size_t bytes) override;
  void zero(void* data, size_t bytes) override;

  int ordinal_ = 0;
  std::array<cudaStream_t, 2> streams_{};
  std::array<cublasHandle_t, 2> blas_{};
  std::array<std::unique_ptr<Scratch>, 2> scratch_;
  Stream current_ = Stream::compute;
  void* reply_device_ = nullptr;
  void* reply_host_ = nullptr;
  // Events recycled round robin: an event id names the slot it was recorded in; more than kEvents
  // events in flight at once would alias (the runners keep a handful).
  static constexpr int kEvents = 256;
  std::array<cudaEvent_t, kEvents> events_{};
  uint64_t next_event_ = 0;
  MemoryCounters counters_;
};

}  // namespace tessera
