// Reductions the host reads back (gradient clipping's sum of squares, the non-finite count): a fixed
// tree per block of kChunk elements, then one block adds the partials in block order, so the result
// depends only on the input (not on scheduling). Sums in double, as on the CPU; the summation order
// differs from the CPU's lanes, so results agree to double rounding, not bit for bit.
#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace tessera::cuda {
namespace {

constexpr int64_t kChunk = kBlockThreads * 64;  // elements per block


__global__ void k_square_partials(double* partials, const float* x, int64_t n) {
  __shared__ double shared[kBlockThreads];
  const int64_t begin = blockIdx.x * kChunk, end = min(n, begin + kChunk);
  double acc = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kBlockThreads) {
    const double xi = x[i];
    acc += xi * xi;
  }
  const double total = block_sum(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void k_nonfinite_partials(int64_t* partials, const float* x, int64_t n) {
  __shared__ int64_t shared[kBlockThreads];
  const int64_t begin = blockIdx.x * kChunk, end = min(n, begin + kChunk);
  int64_t acc = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kBlockThreads) acc += !isfinite(x[i]);
  const int64_t total = block_sum(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

template <class T>
__global__ void k_sum_partials(T* result, const T* partials, int64_t count) {
  __shared__ T shared[kBlockThreads];
  T acc = 0;
  for (int64_t i = threadIdx.x; i < count; i += kBlockThreads) acc += partials[i];
  const T total = block_sum(acc, shared);
  if (threadIdx.x == 0) *result = total;
}

}  // namespace

void sum_of_squares(Launch l, double* result, const float* x, int64_t n) {
  const int64_t blocks = n > 0 ? (n + kChunk - 1) / kChunk : 0;
  double* partials = static_cast<double*>(l.scratch->take(static_cast<size_t>(blocks + 1) * sizeof(double)));
  if (blocks > 0) k_square_partials<<<static_cast<unsigned>(blocks), kBlockThreads, 0, l.stream>>>(partials, x, n);
  k_sum_partials<double><<<1, kBlockThreads, 0, l.stream>>>(result, partials, blocks);
}

void count_nonfinite(Launch l, int64_t* result, const float* x, int64_t n) {
  const int64_t blocks = n > 0 ? (n + kChunk - 1) / kChunk : 0;
  int64_t* partials = static_cast<int64_t*>(l.scratch->take(static_cast<size_t>(blocks + 1) * sizeof(int64_t)));
  if (blocks > 0) k_nonfinite_partials<<<static_cast<unsigned>(blocks), kBlockThreads, 0, l.stream>>>(partials, x, n);
  k_sum_partials<int64_t><<<1, kBlockThreads, 0, l.stream>>>(result, partials, blocks);
}

namespace {
// Runs `reduce` into the reply buffer and hands its value to the host (waits for the stream).
template <class T>
T reply(Launch l, void (*reduce)(Launch, T*, const float*, int64_t), const float* x, int64_t n) {
  T* device = static_cast<T*>(l.reply_device);
  reduce(l, device, x, n);
  cudaMemcpyAsync(l.reply_host, device, sizeof(T), cudaMemcpyDeviceToHost, l.stream);
  cudaStreamSynchronize(l.stream);
  return *static_cast<const T*>(l.reply_host);
}
}  // namespace

double sum_of_squares(Launch l, const float* x, int64_t n) { return reply<double>(l, sum_of_squares, x, n); }
int64_t count_nonfinite(Launch l, const float* x, int64_t n) { return reply<int64_t>(l, count_nonfinite, x, n); }

}  // namespace tessera::cuda
