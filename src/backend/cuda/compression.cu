// Gradient compression's arithmetic on the device (ops.h; cpu/compression_kernels.cpp is the oracle):
// top-k selection, 1-bit sign compression with per-chunk scales, PowerSGD's orthonormalisation. All
// four are compared with the CPU bit for bit, so each mirrors the CPU's operations and their order.
#include <cub/device/device_radix_sort.cuh>

#include "backend/cuda/cuda_kernels.h"

namespace tessera::cuda {
namespace {

constexpr int kThreads = 256;

size_t aligned(size_t bytes) { return (bytes + 255) & ~size_t{255}; }

__device__ int64_t thread_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }

// Sort key of element i: the complemented bits of |m[i]| (for non-negative floats the bit patterns
// order as the values, so ascending keys are descending magnitudes; +-0 share one key).
__global__ void magnitude_keys_kernel(uint32_t* keys, int32_t* pos, const float* m, int64_t n) {
  const int64_t i = thread_index();
  if (i >= n) return;
  keys[i] = ~__float_as_uint(fabsf(m[i]));
  pos[i] = static_cast<int32_t>(i);
}

// Per chunk its mean |m|, summed in double in element order. One thread per chunk.
__global__ void onebit_scales_kernel(float* scales, const float* m, int64_t n, int64_t chunk) {
  const int64_t c = thread_index();
  if (c >= (n + chunk - 1) / chunk) return;
  const int64_t b = c * chunk, e = n < b + chunk ? n : b + chunk;
  double sum = 0;
  for (int64_t i = b; i < e; ++i) sum = __dadd_rn(sum, static_cast<double>(fabsf(m[i])));
  scales[c] = __double2float_rn(__ddiv_rn(sum, static_cast<double>(e - b)));
}

// One thread per 32-element word: its sign bits and its elements' residuals. residual may be m (error
// feedback in place): each element is read and written by the same thread, read first.
__global__ void onebit_words_kernel(uint32_t* words, float* residual, const float* scales, const float* m,
                                    int64_t n, int64_t chunk) {
  const int64_t w = thread_index();
  if (w >= (n + 31) / 32) return;
  uint32_t bits = 0;
  for (int b = 0; b < 32; ++b) {
    const int64_t i = w * 32 + b;
    if (i >= n) break;
    const float v = m[i];
    const bool positive = !(v < 0.0f);  // -0 and +0 are positive
    if (positive) bits |= 1u << b;
    if (residual) {
      const float s = scales[i / chunk];
      residual[i] = __fsub_rn(v, positive ? s : -s);
    }
  }
  words[w] = bits;
}

// out[i] += (bit ? s : -s) with s = scale * scales[chunk] rounded first (the CPU does not fuse these).
__global__ void onebit_accumulate_kernel(float* out, float scale, const float* scales, const uint32_t* words,
                                         int64_t n, int64_t chunk) {
  const int64_t i = thread_index();
  if (i >= n) return;
  const float s = __fmul_rn(scale, scales[i / chunk]);
  const bool positive = (words[i / 32] >> (i % 32)) & 1u;
  out[i] = __fadd_rn(out[i], positive ? s : -s);
}

// Modified Gram-Schmidt in double, one block: each sum runs on thread 0 in the CPU's element order,
// the element-wise updates on the whole block. The roundings are those of the CPU kernel as g++ 12
// (-O3 -march=x86-64-v3) compiles it: `before` and every dot are chains of fused multiply-adds, the
// projection col -= dot * a is fused too, and `norm` is vectorised four wide -- the products of the
// first rows & ~3 elements are rounded before the (in-order) additions, the last rows % 4 are fused.
__global__ void orthonormalise_kernel(float* a, double* col, int64_t rows, int64_t r) {
  __shared__ double broadcast;
  const int64_t tid = threadIdx.x, stride = blockDim.x;
  const int64_t rows4 = rows & ~int64_t{3};
  for (int64_t j = 0; j < r; ++j) {
    for (int64_t i = tid; i < rows; i += stride) col[i] = static_cast<double>(a[i * r + j]);
    __syncthreads();
    double before = 0;  // thread 0's
    if (tid == 0)
      for (int64_t i = 0; i < rows; ++i) before = __fma_rn(col[i], col[i], before);
    for (int64_t k = 0; k < j; ++k) {
      if (tid == 0) {
        double dot = 0;
        for (int64_t i = 0; i < rows; ++i) dot = __fma_rn(col[i], static_cast<double>(a[i * r + k]), dot);
        broadcast = dot;
      }
      __syncthreads();
      const double dot = broadcast;
      for (int64_t i = tid; i < rows; i += stride) col[i] = __fma_rn(-dot, static_cast<double>(a[i * r + k]), col[i]);
      __syncthreads();
    }
    if (tid == 0) {
      double norm = 0;
      for (int64_t i = 0; i < rows4; ++i) norm = __dadd_rn(norm, __dmul_rn(col[i], col[i]));
      for (int64_t i = rows4; i < rows; ++i) norm = __fma_rn(col[i], col[i], norm);
      // Little left after the projections: the column depends on the earlier ones and becomes zero.
      broadcast = norm <= __dmul_rn(1e-8, before) || norm == 0 ? 0.0 : __ddiv_rn(1.0, __dsqrt_rn(norm));
    }
    __syncthreads();
    const double inv = broadcast;
    for (int64_t i = tid; i < rows; i += stride) a[i * r + j] = __double2float_rn(__dmul_rn(col[i], inv));
    __syncthreads();  // col and broadcast are reused by the next column
  }
}

}  // namespace

// A stable radix sort of (magnitude key, index) puts the selection first -- larger magnitude first,
// equal magnitudes by index, as the CPU's comparator -- and a second sort puts its k indices in order.
void topk_select(Launch l, int32_t* idx, int32_t* scratch, const float* m, int64_t n, int64_t k) {
  if (k <= 0 || n <= 0) return;
  size_t by_magnitude_bytes = 0, by_index_bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, by_magnitude_bytes, static_cast<const uint32_t*>(nullptr),
                                  static_cast<uint32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                  static_cast<int32_t*>(nullptr), n, 0, 32, l.stream);
  cub::DeviceRadixSort::SortKeys(nullptr, by_index_bytes, static_cast<const int32_t*>(nullptr),
                                 static_cast<int32_t*>(nullptr), k, 0, 32, l.stream);
  const size_t array_bytes = aligned(static_cast<size_t>(n) * sizeof(uint32_t));
  const size_t temp_bytes = by_magnitude_bytes > by_index_bytes ? by_magnitude_bytes : by_index_bytes;
  char* base = static_cast<char*>(l.scratch->take(3 * array_bytes + temp_bytes));
  auto* keys = reinterpret_cast<uint32_t*>(base);
  auto* sorted_keys = reinterpret_cast<uint32_t*>(base + array_bytes);
  auto* sorted_pos = reinterpret_cast<int32_t*>(base + 2 * array_bytes);
  void* temp = base + 3 * array_bytes;
  // The op's own scratch (n int32) holds the positions 0..n-1 the first sort carries.
  magnitude_keys_kernel<<<blocks_for(n, kThreads), kThreads, 0, l.stream>>>(keys, scratch, m, n);
  // A failed launch stays visible to the backend's cudaGetLastError (CUB peeks, it does not clear).
  cub::DeviceRadixSort::SortPairs(temp, by_magnitude_bytes, keys, sorted_keys, scratch, sorted_pos, n, 0, 32,
                                  l.stream);
  cub::DeviceRadixSort::SortKeys(temp, by_index_bytes, sorted_pos, idx, k, 0, 32, l.stream);
}

void onebit_compress(Launch l, float* scales, uint32_t* words, float* residual, const float* m, int64_t n,
                     int64_t chunk) {
  if (n <= 0 || chunk <= 0) return;
  // Scales first: the words kernel reads them, and may overwrite m (residual == m) that they sum.
  onebit_scales_kernel<<<blocks_for((n + chunk - 1) / chunk, kThreads), kThreads, 0, l.stream>>>(scales, m, n,
                                                                                                 chunk);
  onebit_words_kernel<<<blocks_for((n + 31) / 32, kThreads), kThreads, 0, l.stream>>>(words, residual, scales, m, n,
                                                                                     chunk);
}

void onebit_accumulate(Launch l, float* out, float scale, const float* scales, const uint32_t* words, int64_t n,
                       int64_t chunk) {
  if (n <= 0 || chunk <= 0) return;
  onebit_accumulate_kernel<<<blocks_for(n, kThreads), kThreads, 0, l.stream>>>(out, scale, scales, words, n, chunk);
}

void orthonormalise_columns(Launch l, float* a, int64_t rows, int64_t r) {
  if (rows <= 0 || r <= 0) return;
  auto* col = static_cast<double*>(l.scratch->take(static_cast<size_t>(rows) * sizeof(double)));
  orthonormalise_kernel<<<1, kThreads, 0, l.stream>>>(a, col, rows, r);
}

}  // namespace tessera::cuda
