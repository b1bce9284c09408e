// Reductions the host reads back (gradient clipping's sum of squares, the non-finite count): a fixed
// tree per block of kChunk elements, then one block adds the partials in block order, so the result
// depends only on the input (not on scheduling). Sums in double, as on the CPU; the summation order
// differs from the CPU's lanes, so results agree to double rounding, not bit for bit.
#include "backend/cuda/cuda_kernels.h"

namespace tessera::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = 256 * 64;  // elements per block

template <class T>
__device__ T block_sum(T v, T* shared) {  // a fixed tree over the block's threads
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  return shared[0];
}

__global__ void k_square_partials(double* partials, const float* x, int64_t n) {
  __shared__ double shared[kThreads];
  const int64_t begin = blockIdx.x * kChunk, end = min(n, begin + kChunk);
  double acc = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const double xi = x[i];
    acc += xi * xi;
  }
  const double total = block_sum(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void k_nonfinite_partials(int64_t* partials, const float* x, int64_t n) {
  __shared__ int64_t shared[kThreads];
  const int64_t begin = blockIdx.x * kChunk, end = min(n, begin + kChunk);
  int64_t acc = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) acc += !isfinite(x[i]);
  const int64_t total = block_sum(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

template <class T>
__global__ void k_sum_partials(T* result, const T* partials, int64_t count) {
  __shared__ T shared[kThreads];
  T acc = 0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) acc += partials[i];
  const T total = block_sum(acc, shared);
  if (threadIdx.x == 0) *result = total;
}

}  // namespace

void sum_of_squares(Launch l, double* result, const float* x, int64_t n) {
  const int64_t blocks = n > 0 ? (n + kChunk - 1) / kChunk : 0;
  double* partials = static_cast<double*>(l.scratch->take(static_cast<size_t>(blocks + 1) * sizeof(double)));
  if (blocks > 0) k_square_partials<<<static_cast<unsigned>(blocks), kThreads, 0, l.stream>>>(partials, x, n);
  k_sum_partials<double><<<1, kThreads, 0, l.stream>>>(result, partials, blocks);
}

void count_nonfinite(Launch l, int64_t* result, const float* x, int64_t n) {
  const int64_t blocks = n > 0 ? (n + kChunk - 1) / kChunk : 0;
  int64_t* partials = static_cast<int64_t*>(l.scratch->take(static_cast<size_t>(blocks + 1) * sizeof(int64_t)));
  if (blocks > 0) k_nonfinite_partials<<<static_cast<unsigned>(blocks), kThreads, 0, l.stream>>>(partials, x, n);
  k_sum_partials<int64_t><<<1, kThreads, 0, l.stream>>>(result, partials, blocks);
}

double sum_of_squares(Launch l, const float* x, int64_t n) {
  double* device = static_cast<double*>(l.reply_device);
  sum_of_squares(l, device, x, n);
  cudaMemcpyAsync(l.reply_host, device, sizeof(double), cudaMemcpyDeviceToHost, l.stream);
  cudaStreamSynchronize(l.stream);
  return *static_cast<const double*>(l.reply_host);
}

int64_t count_nonfinite(Launch l, const float* x, int64_t n) {
  int64_t* device = static_cast<int64_t*>(l.reply_device);
  count_nonfinite(l, device, x, n);
  cudaMemcpyAsync(l.reply_host, device, sizeof(int64_t), cudaMemcpyDeviceToHost, l.stream);
  cudaStreamSynchronize(l.stream);
  return *static_cast<const int64_t*>(l.reply_host);
}

}  // namespace tessera::cuda
