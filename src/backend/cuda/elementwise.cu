// Element-wise ops, bf16 storage casts, reduced-precision rounding, AdamW, local SGD's outer step and
// the step's loss. Where the CPU's compiled loop contracts a*b + c into one FMA (axpy, accumulate_bf16,
// outer_sgd_update: g++ -O3 -march=x86-64-v3 emits vfmadd for them), these kernels call __fmaf_rn,
// and elsewhere __fmul_rn / __fadd_rn keep nvcc from contracting: the cross-backend test compares
// them bit for bit.
#include <cuda_fp16.h>

#include "backend/cuda/cuda_kernels.h"

namespace tessera::cuda {
namespace {

__device__ __forceinline__ int64_t item() { return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; }

// As core/dtype.h: round to nearest even, NaN kept quiet.
__device__ __forceinline__ uint16_t to_bf16(float f) {
  uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}
__device__ __forceinline__ float from_bf16(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }

__global__ void k_fill(float* x, int64_t n, float value) {
  const int64_t i = item();
  if (i < n) x[i] = value;
}
__global__ void k_add(float* out, const float* y, const float* x, int64_t n) {
  const int64_t i = item();
  if (i < n) out[i] = __fadd_rn(y[i], x[i]);
}
__global__ void k_axpy(float* y, float a, const float* x, int64_t n) {
  const int64_t i = item();
  if (i < n) y[i] = __fmaf_rn(a, x[i], y[i]);
}
__global__ void k_sub(float* out, const float* a, const float* b, int64_t n) {
  const int64_t i = item();
  if (i < n) out[i] = __fsub_rn(a[i], b[i]);
}
__global__ void k_scale(float* x, int64_t n, float s) {
  const int64_t i = item();
  if (i < n) x[i] = __fmul_rn(x[i], s);
}
// In place the 2-byte outputs overlap the 4-byte inputs, so a parallel cast would read what another
// thread already overwrote: the casts that may run in place stage through a separate pass.
__global__ void k_to_bf16(uint16_t* out, const float* in, int64_t n) {
  const int64_t i = item();
  if (i < n) out[i] = to_bf16(in[i]);
}
__global__ void k_from_bf16(float* out, const uint16_t* in, int64_t n) {
  const int64_t i = item();
  if (i < n) out[i] = from_bf16(in[i]);
}
__global__ void k_copy_u16(uint16_t* out, const uint16_t* in, int64_t n) {
  const int64_t i = item();
  if (i < n) out[i] = in[i];
}
__global__ void k_sub_bf16(float* out, const float* x, const uint16_t* y, int64_t n) {
  const int64_t i = item();
  if (i < n) out[i] = __fsub_rn(x[i], from_bf16(y[i]));
}
__global__ void k_accumulate_bf16(float* out, float scale, const uint16_t* in, int64_t n) {
  const int64_t i = item();
  if (i < n) out[i] = __fmaf_rn(scale, from_bf16(in[i]), out[i]);
}
__global__ void k_round_bf16(float* out, const float* in, int64_t n) {
  const int64_t i = item();
  if (i >= n) return;
  const uint32_t u = __float_as_uint(in[i]);
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  const uint32_t nan = u | 0x00400000u;
  out[i] = __uint_as_float(((((u & 0x7fffffffu) > 0x7f800000u) ? nan : rounded) >> 16) << 16);
}
__global__ void k_round_fp16(float* out, const float* in, int64_t n) {
  const int64_t i = item();
  if (i < n) out[i] = __half2float(__float2half_rn(in[i]));
}
__global__ void k_fill_f64(double* x, int64_t n, double value) {
  const int64_t i = item();
  if (i < n) x[i] = value;
}
// One thread: the row order of the sum is the loss curve's bits (as the CPU's serial loop).
__global__ void k_accumulate_mean_loss(double* loss_sum, const float* losses, int64_t n, int64_t valid) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(losses[i]);
  const float mean = valid > 0 ? __double2float_rn(sum / static_cast<double>(valid)) : 0.f;
  *loss_sum += static_cast<double>(mean);
}
__global__ void k_outer_sgd(float* anchor, float* velocity, const float* delta, int64_t n, float lr, float mu,
                            bool nesterov) {
  const int64_t i = item();
  if (i >= n) return;
  const float v = __fmaf_rn(mu, velocity[i], delta[i]);
  velocity[i] = v;
  const float step = nesterov ? __fmaf_rn(mu, v, delta[i]) : v;
  anchor[i] = __fmaf_rn(-lr, step, anchor[i]);
}
__global__ void k_adamw(float* params, const float* grads, float* m, float* v, int64_t n, float lr, float beta1,
                        float beta2, float eps, float decay, float bc1, float bc2, float grad_scale) {
  const int64_t i = item();
  if (i >= n) return;
  const float g = grads[i] * grad_scale;
  float p = params[i];
  p -= decay * p;
  const float mi = beta1 * m[i] + (1.0f - beta1) * g;
  const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
  m[i] = mi;
  v[i] = vi;
  p -= lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
  params[i] = p;
}

}  // namespace

void fill(Launch l, float* x, int64_t n, float value) {
  if (n > 0) k_fill<<<blocks_for(n), 256, 0, l.stream>>>(x, n, value);
}
void copy(Launch l, float* dst, const float* src, int64_t n) {  // ranges may overlap: cudaMemcpy's are undefined
  if (n <= 0 || dst == src) return;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  const bool overlap = dst < src + n && src < dst + n;
  if (!overlap) {
    cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, l.stream);
    return;
  }
  float* tmp = static_cast<float*>(l.scratch->take(bytes));
  cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDefault, l.stream);
  cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyDefault, l.stream);
}
void add(Launch l, float* out, const float* y, const float* x, int64_t n) {
  if (n > 0) k_add<<<blocks_for(n), 256, 0, l.stream>>>(out, y, x, n);
}
void axpy(Launch l, float* y, float a, const float* x, int64_t n) {
  if (n > 0) k_axpy<<<blocks_for(n), 256, 0, l.stream>>>(y, a, x, n);
}
void sub(Launch l, float* out, const float* a, const float* b, int64_t n) {
  if (n > 0) k_sub<<<blocks_for(n), 256, 0, l.stream>>>(out, a, b, n);
}
void scale_inplace(Launch l, float* x, int64_t n, float s) {
  if (n > 0) k_scale<<<blocks_for(n), 256, 0, l.stream>>>(x, n, s);
}
void cast_f32_to_bf16(Launch l, uint16_t* out, const float* in, int64_t n) {
  if (n <= 0) return;
  const bool overlap = reinterpret_cast<const char*>(out) < reinterpret_cast<const char*>(in + n) &&
                       reinterpret_cast<const char*>(in) < reinterpret_cast<const char*>(out + n);
  uint16_t* dst = overlap ? static_cast<uint16_t*>(l.scratch->take(static_cast<size_t>(n) * 2)) : out;
  k_to_bf16<<<blocks_for(n), 256, 0, l.stream>>>(dst, in, n);
  if (overlap) k_copy_u16<<<blocks_for(n), 256, 0, l.stream>>>(out, dst, n);
}
void cast_bf16_to_f32(Launch l, float* out, const uint16_t* in, int64_t n) {
  if (n <= 0) return;
  const bool overlap = reinterpret_cast<const char*>(out) < reinterpret_cast<const char*>(in + n) &&
                       reinterpret_cast<const char*>(in) < reinterpret_cast<const char*>(out + n);
  if (overlap) {
    uint16_t* tmp = static_cast<uint16_t*>(l.scratch->take(static_cast<size_t>(n) * 2));
    k_copy_u16<<<blocks_for(n), 256, 0, l.stream>>>(tmp, in, n);
    in = tmp;
  }
  k_from_bf16<<<blocks_for(n), 256, 0, l.stream>>>(out, in, n);
}
void sub_bf16(Launch l, float* out, const float* x, const uint16_t* y, int64_t n) {
  if (n > 0) k_sub_bf16<<<blocks_for(n), 256, 0, l.stream>>>(out, x, y, n);
}
void accumulate_bf16(Launch l, float* out, float scale, const uint16_t* in, int64_t n) {
  if (n > 0) k_accumulate_bf16<<<blocks_for(n), 256, 0, l.stream>>>(out, scale, in, n);
}
void round_to_precision(Launch l, float* out, const float* in, int64_t n, ops::MatmulPrecision p) {
  if (n <= 0) return;
  if (p == ops::MatmulPrecision::bf16) k_round_bf16<<<blocks_for(n), 256, 0, l.stream>>>(out, in, n);
  else if (p == ops::MatmulPrecision::fp16) k_round_fp16<<<blocks_for(n), 256, 0, l.stream>>>(out, in, n);
  else copy(l, out, in, n);
}
void fill_f64(Launch l, double* x, int64_t n, double value) {
  if (n > 0) k_fill_f64<<<blocks_for(n), 256, 0, l.stream>>>(x, n, value);
}
void accumulate_mean_loss(Launch l, double* loss_sum, const float* losses, int64_t n, int64_t valid) {
  k_accumulate_mean_loss<<<1, 1, 0, l.stream>>>(loss_sum, losses, n, valid);
}
void outer_sgd_update(Launch l, float* anchor, float* velocity, const float* delta, int64_t n, float lr,
                      float momentum, bool nesterov) {
  if (n > 0) k_outer_sgd<<<blocks_for(n), 256, 0, l.stream>>>(anchor, velocity, delta, n, lr, momentum, nesterov);
}
void adamw_update(Launch l, float* params, const float* grads, float* m, float* v, int64_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int64_t step, float grad_scale) {
  if (n <= 0) return;
  // Bias corrections in double on the host, as the CPU does.
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step)));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step)));
  k_adamw<<<blocks_for(n), 256, 0, l.stream>>>(params, grads, m, v, n, lr, beta1, beta2, eps, lr * weight_decay, bc1,
                                                bc2, grad_scale);
}

}  // namespace tessera::cuda
