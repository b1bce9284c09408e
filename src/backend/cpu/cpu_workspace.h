// The CPU kernels' working memory, owned by a CpuBackend (cpu_backend.h) and passed explicitly to the
// kernels that need any (kernel_table.h: TESSERA_CPU_WORKSPACE_KERNELS; the reduced-precision matmuls,
// matmul_lowp.h), so that no kernel keeps state of its own and two backends never share scratch.
// Everything in it only grows: after the first call with the largest sizes no op allocates.
// One thread issues a backend's ops at a time (as on a device stream); a kernel that needs scratch
// inside a parallel region takes one slot per OpenMP thread (thread_scratch).
// Level-independent: both kernel copies use these types (defined before kernel_isa_begin.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace tessera::ops {

// One growing buffer carved into 64-byte aligned arrays: reserve the total, then take() each array.
// alignas(64): the slots of different threads never share a cache line.
class alignas(64) AlignedScratch {
 public:
  // Room for `floats` floats in total (the sum of the take() sizes, each rounded up to 16); earlier
  // pointers are invalid afterwards.
  void reserve(size_t floats) {
    if (buf_.size() < floats + 16) grow(floats + 16);
    next_ = aligned_;
  }
  float* take(size_t floats) {
    float* p = next_;
    next_ += round16(floats);
    return p;
  }
  static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

 private:
  void grow(size_t floats);  // cpu_workspace.cpp
  std::vector<float> buf_;
  float* aligned_ = nullptr;  // the first 64-byte boundary in buf_
  float* next_ = nullptr;
};

// RoPE's cos/sin of every (position, pair) for one (T, HS, theta), rebuilt only when they change.
struct RopeTable {
  int64_t T = -1, HS = -1;
  float theta = 0.0f;
  std::vector<float> cos, sin;  // (T, HS/2)
};

// The reduced-precision matmuls' state (matmul_lowp.cpp): oneDNN's engine and stream, the bf16
// primitives by shape, the bf16 / rounded-f32 operand copies. Created by the first such matmul.
struct LowpMatmulState;
struct LowpMatmulStateDeleter {
  void operator()(LowpMatmulState* s) const noexcept;  // matmul_lowp.cpp
};

struct CpuWorkspace {
  // n slots (n = omp_get_max_threads() outside the parallel region; inside, slot omp_get_thread_num()).
  AlignedScratch* thread_scratch(int n) {
    if (static_cast<int>(per_thread.size()) < n) grow_threads(n);
    return per_thread.data();
  }

  std::vector<AlignedScratch> per_thread;
  std::vector<float> attention_D;  // (B, NH, T): attention_backward's rowsum(dout * out)
  RopeTable rope;
  std::vector<float> padded_operand;  // sgemm's padded copy of an aliasing operand (sgemm_padded.h)
  // The backend's bf16 setting (CpuBackend::set_bf16_gemm_native): whether a bf16 matmul may run
  // oneDNN's native AVX512-BF16 / AMX kernel where it has one (else: rounded f32 through sgemm).
  bool bf16_gemm_native = true;
  std::unique_ptr<LowpMatmulState, LowpMatmulStateDeleter> lowp;

 private:
  void grow_threads(int n);  // cpu_workspace.cpp
};

// v.data() with at least n elements (v only grows).
float* grown(std::vector<float>& v, size_t n);

}  // namespace tessera::ops
