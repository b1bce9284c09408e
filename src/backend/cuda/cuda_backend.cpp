// The CudaBackend's streams, events, memory, copies and scratch (the ops themselves are the launchers
// of cuda_kernels.h, forwarded by the class's op list).
#include "backend/cuda/cuda_backend.h"

#include <cstring>
#include <utility>

#include "core/log.h"

namespace tessera {
namespace {

void check(cudaError_t err, const char* what) {
  TS_CHECK(err == cudaSuccess) << "CUDA: " << what << " failed: " << cudaGetErrorName(err) << " ("
                               << cudaGetErrorString(err) << ")";
}

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: not sticky, and not an error here
    return 0;
  }
  return n;
}

std::string cuda_device_summary(int ordinal) {
  const int n = cuda_device_count();
  if (ordinal >= n)
    return "no CUDA device " + std::to_string(ordinal) + " (this process sees " + std::to_string(n) + ")";
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, ordinal) != cudaSuccess) return "CUDA device " + std::to_string(ordinal) + " unreadable";
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         std::to_string(p.totalGlobalMem >> 30) + " GiB)";
}

// A device buffer that only grows. Growing waits for the stream, so kernels still reading the old
// buffer finish before it is freed.
class CudaBackend::Scratch final : public cuda::DeviceScratch {
 public:
  explicit Scratch(cudaStream_t s) : stream_(s) {}
  ~Scratch() override {
    if (data_) cudaFree(data_);
  }
  void* take(size_t bytes) override {
    if (bytes > bytes_) {
      if (data_) {
        check(cudaStreamSynchronize(stream_), "waiting for the stream before growing scratch");
        check(cudaFree(data_), "cudaFree (scratch)");
      }
      bytes_ = std::max(bytes, bytes_ * 2);
      check(cudaMalloc(&data_, bytes_), "cudaMalloc (scratch)");
    }
    return data_;
  }

 private:
  cudaStream_t stream_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

Result<std::unique_ptr<CudaBackend>> CudaBackend::open(int ordinal) {
  const int n = cuda_device_count();
  if (n == 0)
    return invalid_argument(
        "train.device = \"cuda\": this process sees no CUDA device (no GPU, no driver, or CUDA_VISIBLE_DEVICES "
        "hides them); use train.device = \"cpu\" or run where a GPU is");
  if (ordinal < 0 || ordinal >= n)
    return invalid_argument("CUDA device " + std::to_string(ordinal) + " does not exist: this process sees " +
                            std::to_string(n));
  return std::unique_ptr<CudaBackend>(new CudaBackend(ordinal));
}

CudaBackend::CudaBackend(int ordinal) : ordinal_(ordinal) {
  check(cudaSetDevice(ordinal), "cudaSetDevice");
  for (int s = 0; s < 2; ++s) {
    check(cudaStreamCreateWithFlags(&streams_[s], cudaStreamNonBlocking), "cudaStreamCreate");
    TS_CHECK(cublasCreate(&blas_[s]) == CUBLAS_STATUS_SUCCESS) << "cuBLAS: cublasCreate failed";
    TS_CHECK(cublasSetStream(blas_[s], streams_[s]) == CUBLAS_STATUS_SUCCESS) << "cuBLAS: cublasSetStream failed";
    // f32 stays f32: no TF32 tensor-core rounding behind the exact path.
    TS_CHECK(cublasSetMathMode(blas_[s], CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_SUCCESS) << "cuBLAS: math mode";
    scratch_[s] = std::make_unique<Scratch>(streams_[s]);
  }
  for (cudaEvent_t& e : events_) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaMalloc(&reply_device_, 16), "cudaMalloc (reply)");
  check(cudaMallocHost(&reply_host_, 16), "cudaMallocHost (reply)");
}

CudaBackend::~CudaBackend() {
  cudaDeviceSynchronize();
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  for (auto& s : scratch_) s.reset();
  for (cublasHandle_t h : blas_) cublasDestroy(h);
  for (cudaStream_t s : streams_) cudaStreamDestroy(s);
  cudaFree(reply_device_);
  cudaFreeHost(reply_host_);
}

cuda::Launch CudaBackend::launch() {
  const int s = static_cast<int>(current_);
  return {streams_[s], scratch_[s].get(), blas_[s], reply_device_, reply_host_};
}

void CudaBackend::check_launch(const char* op) {
  const cudaError_t err = cudaGetLastError();
  TS_CHECK(err == cudaSuccess) << "CUDA: op " << op << " failed to launch: " << cudaGetErrorName(err) << " ("
                               << cudaGetErrorString(err) << ")";
}

void CudaBackend::copy_to_device(void* device, const void* host, size_t bytes) {
  if (bytes == 0) return;
  const cudaStream_t s = stream(current_);
  check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, s), "copy to the device");
  check(cudaStreamSynchronize(s), "copy to the device (wait)");  // the host may reuse its memory at once
}

void CudaBackend::copy_to_host(void* host, const void* device, size_t bytes) {
  if (bytes == 0) return;
  const cudaStream_t s = stream(current_);
  check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, s), "copy to the host");
  check(cudaStreamSynchronize(s), "copy to the host (wait)");
}

bool CudaBackend::is_device_memory(const void* p) const {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();  // an unregistered host pointer: not sticky
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

void CudaBackend::synchronize() {
  for (cudaStream_t s : streams_) check(cudaStreamSynchronize(s), "synchronize (an op failed on the device)");
}

Buffer CudaBackend::allocate(size_t bytes, MemCategory category, Residency) {
  void* data = nullptr;
  if (bytes > 0) {
    const cudaError_t err = cudaMalloc(&data, bytes);
    TS_CHECK(err == cudaSuccess) << "CUDA: out of device memory allocating " << bytes << " bytes of "
                                 << mem_category_name(category) << " (" << cudaGetErrorString(err)
                                 << "); `tessera plan` shows where the memory goes";
    // Zeroed and visible to every stream before the buffer is handed out.
    check(cudaMemset(data, 0, bytes), "zeroing a new buffer");
    check(cudaDeviceSynchronize(), "zeroing a new buffer (wait)");
  }
  return Buffer(*this, data, bytes, category, &counters_);
}

void CudaBackend::release(void* data, size_t) {
  synchronize();  // no op still reading it
  cudaFree(data);
}

void CudaBackend::zero(void* data, size_t bytes) {
  check(cudaMemsetAsync(data, 0, bytes, stream(current_)), "zeroing a range");
}

Backend::Stream CudaBackend::set_stream(Stream s) { return std::exchange(current_, s); }

Backend::Event CudaBackend::record_event(Stream s) {
  const uint64_t id = ++next_event_;
  check(cudaEventRecord(events_[id % kEvents], stream(s)), "cudaEventRecord");
  return {id};
}

void CudaBackend::wait_event(Stream waiter, Event e) {
  check(cudaStreamWaitEvent(stream(waiter), events_[e.id % kEvents], 0), "cudaStreamWaitEvent");
}

void CudaBackend::synchronize_event(Event e) {
  check(cudaEventSynchronize(events_[e.id % kEvents]), "cudaEventSynchronize");
}

}  // namespace tessera
