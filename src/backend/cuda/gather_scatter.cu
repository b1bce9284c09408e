// Index-driven ops on the device (ops.h; cpu/gather_scatter.cpp is the oracle). The scatters that add
// may meet a repeated index: their positions are sorted by index first (the radix sort is stable, so
// equal indices stay in position order), then one thread per distinct index (and column) adds its run
// in that order -- the CPU's summation order with one writer per element and no atomics.
#include <algorithm>
#include <cub/device/device_radix_sort.cuh>

#include "backend/cuda/cuda_kernels.h"

namespace tessera::cuda {
namespace {

constexpr int kThreads = 256;

size_t aligned(size_t bytes) { return (bytes + 255) & ~size_t{255}; }

__device__ int64_t thread_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }

template <class Index>
__global__ void iota_kernel(Index* pos, int64_t k) {
  const int64_t j = thread_index();
  if (j < k) pos[j] = static_cast<Index>(j);
}

// The positions 0..k-1 ordered by idx[position], equal indices in position order.
template <class Index>
struct SortedPositions {
  const Index* keys;  // idx, sorted
  const Index* pos;   // the position each sorted key came from
};

// Takes the launcher's scratch (once, for everything it needs).
template <class Index>
SortedPositions<Index> sort_positions(Launch l, const Index* idx, int64_t k) {
  size_t temp_bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, idx, static_cast<Index*>(nullptr),
                                  static_cast<const Index*>(nullptr), static_cast<Index*>(nullptr), k, 0,
                                  static_cast<int>(sizeof(Index) * 8), l.stream);
  const size_t array_bytes = aligned(static_cast<size_t>(k) * sizeof(Index));
  char* base = static_cast<char*>(l.scratch->take(3 * array_bytes + temp_bytes));
  auto* keys = reinterpret_cast<Index*>(base);
  auto* pos_in = reinterpret_cast<Index*>(base + array_bytes);
  auto* pos = reinterpret_cast<Index*>(base + 2 * array_bytes);
  iota_kernel<<<blocks_for(k, kThreads), kThreads, 0, l.stream>>>(pos_in, k);
  // A failed launch stays visible to the backend's cudaGetLastError (CUB peeks, it does not clear).
  cub::DeviceRadixSort::SortPairs(base + 3 * array_bytes, temp_bytes, idx, keys, pos_in, pos, k, 0,
                                  static_cast<int>(sizeof(Index) * 8), l.stream);
  return {keys, pos};
}

// True for the first sorted position of each distinct index: the one thread that owns its run.
template <class Index>
__device__ bool run_head(const Index* keys, int64_t p) {
  return p == 0 || keys[p] != keys[p - 1];
}

__global__ void gather_kernel(float* out, const float* x, const int32_t* idx, int64_t k) {
  const int64_t j = thread_index();
  if (j < k) out[j] = x[idx[j]];
}

// The CPU's out[idx[j]] += scale * val[j] compiles to one fused multiply-add (g++ -O3
// -march=x86-64-v3 contracts it: vfmadd213ss), so the same fma here, run by run in j order.
__global__ void scatter_add_kernel(float* out, float scale, SortedPositions<int32_t> s, const float* val,
                                   int64_t k) {
  const int64_t p = thread_index();
  if (p >= k || !run_head(s.keys, p)) return;
  const int32_t r = s.keys[p];
  float acc = out[r];
  for (int64_t q = p; q < k && s.keys[q] == r; ++q) acc = __fmaf_rn(scale, val[s.pos[q]], acc);
  out[r] = acc;
}

// A repeated index is written more than once, but always with the same value.
__global__ void scatter_fill_kernel(float* out, const int32_t* idx, int64_t k, float value) {
  const int64_t j = thread_index();
  if (j < k) out[idx[j]] = value;
}

// One warp per row (blocks are whole warps, so a warp's row is uniform). != 0.f: +-0 are zero, NaN is not.
__global__ void nonzero_rows_kernel(int32_t* mask, const float* x, int64_t rows, int64_t cols) {
  const int64_t r = thread_index() / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (r >= rows) return;
  const float* row = x + r * cols;
  bool touched = false;
  for (int64_t c0 = 0; c0 < cols && !touched; c0 += 32) {
    const int64_t c = c0 + lane;
    touched = __any_sync(0xffffffffu, c < cols && row[c] != 0.f);
  }
  if (lane == 0) mask[r] = touched ? 1 : 0;
}

// Rows [j0, j1) of the gather, written to out's rows [j0 - out_row0, ...).
__global__ void gather_rows_kernel(float* out, const float* x, const int64_t* idx, int64_t j0, int64_t j1,
                                   int64_t out_row0, int64_t cols) {
  const int64_t i = thread_index();
  if (i >= (j1 - j0) * cols) return;
  const int64_t j = j0 + i / cols, c = i % cols;
  out[(j - out_row0) * cols + c] = x[idx[j] * cols + c];
}

__global__ void copy_kernel(float* dst, const float* src, int64_t n) {
  const int64_t i = thread_index();
  if (i < n) dst[i] = src[i];
}

// out[idx[j]] += x[j] row-wise, one thread per (distinct index, column) adding its run in j order.
__global__ void scatter_add_rows_kernel(float* out, SortedPositions<int64_t> s, const float* x, int64_t k,
                                        int64_t cols) {
  const int64_t i = thread_index();
  if (i >= k * cols) return;
  const int64_t p = i / cols, c = i % cols;
  if (!run_head(s.keys, p)) return;
  const int64_t r = s.keys[p];
  float acc = out[r * cols + c];
  for (int64_t q = p; q < k && s.keys[q] == r; ++q) acc = __fadd_rn(acc, x[s.pos[q] * cols + c]);
  out[r * cols + c] = acc;
}

}  // namespace

void gather(Launch l, float* out, const float* x, const int32_t* idx, int64_t k) {
  if (k <= 0) return;
  gather_kernel<<<blocks_for(k, kThreads), kThreads, 0, l.stream>>>(out, x, idx, k);
}

void scatter_add(Launch l, float* out, float scale, const int32_t* idx, const float* val, int64_t k) {
  if (k <= 0) return;
  const SortedPositions<int32_t> s = sort_positions(l, idx, k);
  scatter_add_kernel<<<blocks_for(k, kThreads), kThreads, 0, l.stream>>>(out, scale, s, val, k);
}

void scatter_fill(Launch l, float* out, const int32_t* idx, int64_t k, float value) {
  if (k <= 0) return;
  scatter_fill_kernel<<<blocks_for(k, kThreads), kThreads, 0, l.stream>>>(out, idx, k, value);
}

void nonzero_rows(Launch l, int32_t* mask, const float* x, int64_t rows, int64_t cols) {
  if (rows <= 0) return;
  nonzero_rows_kernel<<<blocks_for(rows * 32, kThreads), kThreads, 0, l.stream>>>(mask, x, rows, cols);
}

void gather_rows(Launch l, float* out, const float* x, const int64_t* idx, int64_t k, int64_t cols) {
  if (k <= 0 || cols <= 0) return;
  if (out != x) {
    gather_rows_kernel<<<blocks_for(k * cols, kThreads), kThreads, 0, l.stream>>>(out, x, idx, 0, k, 0, cols);
    return;
  }
  // In place (idx ascending, so idx[j] >= j): row j's source is never a row written before it, but
  // it may be a row written after it, so each piece of rows is gathered whole into scratch before it
  // is written back. Pieces are bounded so the scratch stays moderate.
  constexpr int64_t kPieceFloats = int64_t{1} << 22;
  const int64_t piece_rows = cols >= kPieceFloats ? 1 : std::min(k, kPieceFloats / cols);
  auto* tmp = static_cast<float*>(l.scratch->take(static_cast<size_t>(piece_rows * cols) * sizeof(float)));
  for (int64_t j0 = 0; j0 < k; j0 += piece_rows) {
    const int64_t j1 = std::min(k, j0 + piece_rows), n = (j1 - j0) * cols;
    gather_rows_kernel<<<blocks_for(n, kThreads), kThreads, 0, l.stream>>>(tmp, x, idx, j0, j1, j0, cols);
    copy_kernel<<<blocks_for(n, kThreads), kThreads, 0, l.stream>>>(out + j0 * cols, tmp, n);
  }
}

void scatter_add_rows(Launch l, float* out, const int64_t* idx, const float* x, int64_t k, int64_t cols) {
  if (k <= 0 || cols <= 0) return;
  const SortedPositions<int64_t> s = sort_positions(l, idx, k);
  scatter_add_rows_kernel<<<blocks_for(k * cols, kThreads), kThreads, 0, l.stream>>>(out, s, x, k, cols);
}

}  // namespace tessera::cuda
