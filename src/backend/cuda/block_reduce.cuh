// Reductions over one block of kBlockThreads threads in a fixed tree: every thread gets the same
// result, and the order of the additions depends only on the block size, so results repeat bit for
// bit. Each call ends with a barrier, so the shared buffer may be reused by the next call.
#pragma once
#include <cuda_runtime.h>

namespace tessera::cuda {

constexpr int kBlockThreads = 256;

template <class T, class Op>
__device__ T block_reduce(T v, T* shared, Op op) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kBlockThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] = op(shared[threadIdx.x], shared[threadIdx.x + s]);
    __syncthreads();
  }
  const T total = shared[0];
  __syncthreads();
  return total;
}

template <class T>
__device__ T block_sum(T v, T* shared) {
  return block_reduce(v, shared, [](T a, T b) { return a + b; });
}

__device__ inline float block_max(float v, float* shared) {
  return block_reduce(v, shared, [](float a, float b) { return fmaxf(a, b); });
}

}  // namespace tessera::cuda
