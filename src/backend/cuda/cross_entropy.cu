// The fused softmax + cross-entropy (whole vocabulary) and its vocabulary-parallel pieces: one block
// per row, the normaliser summed in double through a fixed tree (deterministic), the logits
// overwritten by their gradient when asked, as the CPU ops do.
#include <cfloat>

#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace tessera::cuda {
namespace {


__global__ void k_softmax_crossentropy(float* losses, float* logits, const int32_t* targets, int64_t V,
                                       float dlogits_scale) {
  __shared__ float fshared[kBlockThreads];
  __shared__ double dshared[kBlockThreads];
  const int64_t n = blockIdx.x;
  float* x = logits + n * V;
  const int32_t target = targets[n];
  const bool write_grad = dlogits_scale != 0.0f;
  if (target < 0) {  // an ignored row
    if (threadIdx.x == 0) losses[n] = 0.0f;
    if (write_grad)
      for (int64_t v = threadIdx.x; v < V; v += kBlockThreads) x[v] = 0.0f;
    return;
  }
  float mx = -FLT_MAX;
  for (int64_t v = threadIdx.x; v < V; v += kBlockThreads) mx = fmaxf(mx, x[v]);
  mx = block_max(mx, fshared);
  const float target_logit = x[target];
  double acc = 0;
  for (int64_t v = threadIdx.x; v < V; v += kBlockThreads) acc += static_cast<double>(expf(x[v] - mx));
  const double sum = block_sum(acc, dshared);
  if (threadIdx.x == 0) losses[n] = static_cast<float>(log(sum) - static_cast<double>(target_logit - mx));
  if (!write_grad) return;
  const float scale = static_cast<float>(static_cast<double>(dlogits_scale) / sum);
  for (int64_t v = threadIdx.x; v < V; v += kBlockThreads)
    x[v] = expf(x[v] - mx) * scale - (v == target ? dlogits_scale : 0.0f);
}

__global__ void k_rowmax(float* row_max, const float* logits, int64_t Vl, int64_t valid) {
  __shared__ float shared[kBlockThreads];
  const float* x = logits + blockIdx.x * Vl;
  float mx = -INFINITY;
  for (int64_t v = threadIdx.x; v < valid; v += kBlockThreads) mx = fmaxf(mx, x[v]);
  mx = block_max(mx, shared);
  if (threadIdx.x == 0) row_max[blockIdx.x] = mx;
}

__global__ void k_sumexp_target(float* stats, const float* logits, const float* row_max, const int32_t* targets,
                                int64_t Vl, int64_t valid, int64_t lo) {
  __shared__ double shared[kBlockThreads];
  const int64_t n = blockIdx.x;
  const float* x = logits + n * Vl;
  float* s = stats + 2 * n;
  const int64_t t = targets[n];
  if (t < 0) {
    if (threadIdx.x == 0) s[0] = s[1] = 0.0f;
    return;
  }
  const float mx = row_max[n];
  double acc = 0;
  for (int64_t v = threadIdx.x; v < valid; v += kBlockThreads) acc += static_cast<double>(expf(x[v] - mx));
  const double sum = block_sum(acc, shared);
  if (threadIdx.x == 0) {
    s[0] = static_cast<float>(sum);
    s[1] = t >= lo && t < lo + valid ? x[t - lo] - mx : 0.0f;
  }
}

__global__ void k_crossentropy_finish(float* losses, float* logits, const float* stats, const float* row_max,
                                      const int32_t* targets, int64_t Vl, int64_t valid, int64_t lo,
                                      float dlogits_scale) {
  const int64_t n = blockIdx.x;
  float* x = logits + n * Vl;
  const int64_t t = targets[n];
  const bool write_grad = dlogits_scale != 0.0f;
  if (t < 0) {
    if (threadIdx.x == 0) losses[n] = 0.0f;
    if (write_grad)
      for (int64_t v = threadIdx.x; v < Vl; v += blockDim.x) x[v] = 0.0f;
    return;
  }
  const double sum = stats[2 * n];
  if (threadIdx.x == 0) losses[n] = static_cast<float>(log(sum) - static_cast<double>(stats[2 * n + 1]));
  if (!write_grad) return;
  const float mx = row_max[n];
  const float scale = static_cast<float>(static_cast<double>(dlogits_scale) / sum);
  for (int64_t v = threadIdx.x; v < Vl; v += blockDim.x) {
    float g = v < valid ? expf(x[v] - mx) * scale : 0.0f;
    if (v == t - lo && v < valid) g -= dlogits_scale;
    x[v] = g;
  }
}

}  // namespace

void softmax_crossentropy(Launch l, float* losses, float* logits, const int32_t* targets, int64_t N, int64_t V,
                          float dlogits_scale) {
  if (N > 0)
    k_softmax_crossentropy<<<static_cast<unsigned>(N), kBlockThreads, 0, l.stream>>>(losses, logits, targets, V,
                                                                               dlogits_scale);
}
void crossentropy_rowmax(Launch l, float* row_max, const float* logits, int64_t N, int64_t Vl, int64_t valid) {
  if (N > 0) k_rowmax<<<static_cast<unsigned>(N), kBlockThreads, 0, l.stream>>>(row_max, logits, Vl, valid);
}
void crossentropy_sumexp_target(Launch l, float* stats, const float* logits, const float* row_max,
                                const int32_t* targets, int64_t N, int64_t Vl, int64_t valid, int64_t lo) {
  if (N > 0)
    k_sumexp_target<<<static_cast<unsigned>(N), kBlockThreads, 0, l.stream>>>(stats, logits, row_max, targets, Vl, valid,
                                                                        lo);
}
void crossentropy_finish(Launch l, float* losses, float* logits, const float* stats, const float* row_max,
                         const int32_t* targets, int64_t N, int64_t Vl, int64_t valid, int64_t lo,
                         float dlogits_scale) {
  if (N > 0)
    k_crossentropy_finish<<<static_cast<unsigned>(N), kBlockThreads, 0, l.stream>>>(losses, logits, stats, row_max,
                                                                              targets, Vl, valid, lo, dlogits_scale);
}

}  // namespace tessera::cuda
