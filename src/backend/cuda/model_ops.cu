// The model's ops besides matmuls, attention and the loss: embeddings, LayerNorm / RMSNorm, GELU,
// SwiGLU, RoPE and the bias gradient. Row ops run one block per row with a fixed reduction tree;
// parameter gradients (norm weights, biases, embedding rows) are column sums in which one thread owns
// a column and walks the rows in order, so every result is deterministic without atomics. The
// embedding ops repeat the CPU's additions in its order, so they match it bit for bit.
#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace tessera::cuda {
namespace {


// ---- embeddings ----
__global__ void k_embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t T,
                                    int64_t C, int64_t lo, int64_t hi) {
  const int64_t bt = blockIdx.x;
  const int64_t tok = tokens[bt];
  const bool mine = tok >= lo && tok < hi;
  const float* e = wte + (mine ? tok - lo : 0) * C;
  const float* p = wpe ? wpe + (bt % T) * C : nullptr;
  float* o = out + bt * C;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
    o[c] = mine && p ? __fadd_rn(e[c], p[c]) : mine ? e[c] : p ? p[c] : 0.0f;
}
// One thread per channel walks the tokens in order: each row sums its tokens as the CPU does.
__global__ void k_embedding_backward_wte(float* dwte, const float* dout, const int32_t* tokens, int64_t BT, int64_t C,
                                         int64_t lo, int64_t hi) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  for (int64_t bt = 0; bt < BT; ++bt) {
    const int64_t tok = tokens[bt];
    if (tok < lo || tok >= hi) continue;
    float* g = dwte + (tok - lo) * C + c;
    *g = __fadd_rn(*g, dout[bt * C + c]);
  }
}
__global__ void k_embedding_backward_wpe(float* dwpe, const float* dout, int64_t B, int64_t T, int64_t C) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;  // (t, c)
  if (i >= T * C) return;
  const int64_t t = i / C, c = i % C;
  float g = dwpe[i];
  for (int64_t b = 0; b < B; ++b) g = __fadd_rn(g, dout[(b * T + t) * C + c]);
  dwpe[i] = g;
}

// ---- normalisation ----
__global__ void k_layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                    const float* bias, int64_t C, float eps) {
  __shared__ float shared[kBlockThreads];
  const int64_t n = blockIdx.x;
  const float* x = inp + n * C;
  float* o = out + n * C;
  float acc = 0;
  for (int64_t c = threadIdx.x; c < C; c += kBlockThreads) acc += x[c];
  const float m = block_sum(acc, shared) / static_cast<float>(C);
  acc = 0;  // two passes: no cancellation of E[x^2] - E[x]^2
  for (int64_t c = threadIdx.x; c < C; c += kBlockThreads) acc += (x[c] - m) * (x[c] - m);
  const float var = block_sum(acc, shared) / static_cast<float>(C);
  const float s = 1.0f / sqrtf(var + eps);
  for (int64_t c = threadIdx.x; c < C; c += kBlockThreads) o[c] = (x[c] - m) * s * weight[c] + bias[c];
  if (threadIdx.x == 0) {
    mean[n] = m;
    rstd[n] = s;
  }
}
__global__ void k_layernorm_backward_rows(float* dinp, const float* dout, const float* inp, const float* weight,
                                          const float* mean, const float* rstd, int64_t C) {
  __shared__ float shared[kBlockThreads];
  const int64_t n = blockIdx.x;
  const float* x = inp + n * C;
  const float* d = dout + n * C;
  float* di = dinp + n * C;
  const float m = mean[n], s = rstd[n];
  float a = 0, b = 0;
  for (int64_t c = threadIdx.x; c < C; c += kBlockThreads) {
    a += d[c] * weight[c];
    b += d[c] * weight[c] * (x[c] - m) * s;
  }
  const float dnorm_mean = block_sum(a, shared) / static_cast<float>(C);
  const float dnorm_norm_mean = block_sum(b, shared) / static_cast<float>(C);
  for (int64_t c = threadIdx.x; c < C; c += kBlockThreads) {
    const float norm = (x[c] - m) * s;
    di[c] += s * (d[c] * weight[c] - dnorm_mean - norm * dnorm_norm_mean);
  }
}
// dweight += sum_n dout * norm (norm from mean/rstd; rmsnorm: mean == nullptr), dbias += sum_n dout.
__global__ void k_norm_backward_columns(float* dweight, float* dbias, const float* dout, const float* inp,
                                        const float* mean, const float* rstd, int64_t N, int64_t C) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  float dw = 0, db = 0;
  for (int64_t n = 0; n < N; ++n) {
    const float d = dout[n * C + c];
    const float centred = mean ? inp[n * C + c] - mean[n] : inp[n * C + c];
    dw += d * centred * rstd[n];
    db += d;
  }
  dweight[c] += dw;
  if (dbias) dbias[c] += db;
}
__global__ void k_rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t C, float eps) {
  __shared__ float shared[kBlockThreads];
  const int64_t n = blockIdx.x;
  const float* x = inp + n * C;
  float* o = out + n * C;
  float acc = 0;
  for (int64_t c = threadIdx.x; c < C; c += kBlockThreads) acc += x[c] * x[c];
  const float s = 1.0f / sqrtf(block_sum(acc, shared) / static_cast<float>(C) + eps);
  for (int64_t c = threadIdx.x; c < C; c += kBlockThreads) o[c] = x[c] * s * weight[c];
  if (threadIdx.x == 0) rstd[n] = s;
}
__global__ void k_rmsnorm_backward_rows(float* dinp, const float* dout, const float* inp, const float* weight,
                                        const float* rstd, int64_t C) {
  __shared__ float shared[kBlockThreads];
  const int64_t n = blockIdx.x;
  const float* x = inp + n * C;
  const float* d = dout + n * C;
  float* di = dinp + n * C;
  const float s = rstd[n];
  float acc = 0;
  for (int64_t c = threadIdx.x; c < C; c += kBlockThreads) acc += d[c] * weight[c] * x[c] * s;
  const float dy_xhat_mean = block_sum(acc, shared) / static_cast<float>(C);
  for (int64_t c = threadIdx.x; c < C; c += kBlockThreads) di[c] += s * (d[c] * weight[c] - x[c] * s * dy_xhat_mean);
}

// ---- activations ----
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoeff = 0.044715f;
__device__ __forceinline__ float sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }

__global__ void k_gelu_forward(float* out, const float* inp, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float x = inp[i];
  const float u = kSqrt2OverPi * (x + kGeluCoeff * x * x * x);
  out[i] = x * sigmoid(2.0f * u);  // 0.5 (1 + tanh u) = sigmoid(2u)
}
__global__ void k_gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float x = inp[i];
  const float u = kSqrt2OverPi * (x + kGeluCoeff * x * x * x);
  const float s = sigmoid(2.0f * u);
  const float du_dx = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * x * x);
  dinp[i] += (s + 2.0f * x * s * (1.0f - s) * du_dx) * dout[i];
}
__global__ void k_swiglu_forward(float* out, const float* inp, int64_t N, int64_t H) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;  // (n, h)
  if (i >= N * H) return;
  const int64_t n = i / H, h = i % H;
  const float g = inp[n * 2 * H + h], up = inp[n * 2 * H + H + h];
  out[i] = g * sigmoid(g) * up;
}
__global__ void k_swiglu_backward(float* dinp, const float* dout, const float* inp, int64_t N, int64_t H) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= N * H) return;
  const int64_t n = i / H, h = i % H;
  const float g = inp[n * 2 * H + h], up = inp[n * 2 * H + H + h], d = dout[i];
  const float sig = sigmoid(g);
  dinp[n * 2 * H + h] += d * up * sig * (1.0f + g * (1.0f - sig));
  dinp[n * 2 * H + H + h] += d * g * sig;
}

// ---- RoPE: the angle in double, as the CPU's table ----
__global__ void k_rope(float* qkv, int64_t T, int64_t pos0, int64_t rotated_heads, int64_t row, int64_t HS,
                       float theta, float sign, int64_t total) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;  // (bt, head, pair)
  if (i >= total) return;
  const int64_t half = HS / 2;
  const int64_t pair = i % half, h = (i / half) % rotated_heads, bt = i / (half * rotated_heads);
  const int64_t t = pos0 + bt % T;
  const double angle = static_cast<double>(t) * pow(static_cast<double>(theta), -2.0 * static_cast<double>(pair) / HS);
  const float c = static_cast<float>(cos(angle)), s = sign * static_cast<float>(sin(angle));
  float* x = qkv + bt * row + h * HS;
  const float x1 = x[pair], x2 = x[pair + half];
  x[pair] = x1 * c - x2 * s;
  x[pair + half] = x2 * c + x1 * s;
}

__global__ void k_bias_backward(float* dbias, const float* dout, int64_t N, int64_t OC) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= OC) return;
  float acc = 0;
  for (int64_t n = 0; n < N; ++n) acc = __fadd_rn(acc, dout[n * OC + j]);
  dbias[j] = __fadd_rn(dbias[j], acc);
}

__global__ void k_bias_broadcast(float* out, const float* bias, int64_t N, int64_t OC) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < N * OC) out[i] = bias[i % OC];
}

void rope(Launch l, float* qkv, int64_t B, int64_t T, int64_t pos0, int64_t NH, int64_t NKV, int64_t HS, float theta,
          float sign) {
  const int64_t total = B * T * (NH + NKV) * (HS / 2);
  if (total > 0)
    k_rope<<<blocks_for(total), 256, 0, l.stream>>>(qkv, T, pos0, NH + NKV, (NH + 2 * NKV) * HS, HS, theta, sign,
                                                    total);
}

}  // namespace

void embedding_forward_range(Launch l, float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B,
                             int64_t T, int64_t C, int64_t lo, int64_t hi) {
  if (B * T > 0) k_embedding_forward<<<static_cast<unsigned>(B * T), 128, 0, l.stream>>>(out, tokens, wte, wpe, T, C, lo, hi);
}
void embedding_backward_range(Launch l, float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B,
                              int64_t T, int64_t C, int64_t lo, int64_t hi) {
  if (C <= 0) return;
  k_embedding_backward_wte<<<blocks_for(C, 64), 64, 0, l.stream>>>(dwte, dout, tokens, B * T, C, lo, hi);
  if (dwpe && T * C > 0) k_embedding_backward_wpe<<<blocks_for(T * C), 256, 0, l.stream>>>(dwpe, dout, B, T, C);
}
void layernorm_forward(Launch l, float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int64_t C, float eps) {
  if (N > 0) k_layernorm_forward<<<static_cast<unsigned>(N), kBlockThreads, 0, l.stream>>>(out, mean, rstd, inp, weight, bias, C, eps);
}
void layernorm_backward(Launch l, float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C) {
  if (N <= 0 || C <= 0) return;
  k_layernorm_backward_rows<<<static_cast<unsigned>(N), kBlockThreads, 0, l.stream>>>(dinp, dout, inp, weight, mean, rstd, C);
  k_norm_backward_columns<<<blocks_for(C, 64), 64, 0, l.stream>>>(dweight, dbias, dout, inp, mean, rstd, N, C);
}
void rmsnorm_forward(Launch l, float* out, float* rstd, const float* inp, const float* weight, int64_t N, int64_t C,
                     float eps) {
  if (N > 0) k_rmsnorm_forward<<<static_cast<unsigned>(N), kBlockThreads, 0, l.stream>>>(out, rstd, inp, weight, C, eps);
}
void rmsnorm_backward(Launch l, float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int64_t N, int64_t C) {
  if (N <= 0 || C <= 0) return;
  k_rmsnorm_backward_rows<<<static_cast<unsigned>(N), kBlockThreads, 0, l.stream>>>(dinp, dout, inp, weight, rstd, C);
  k_norm_backward_columns<<<blocks_for(C, 64), 64, 0, l.stream>>>(dweight, nullptr, dout, inp, nullptr, rstd, N, C);
}
void gelu_forward(Launch l, float* out, const float* inp, int64_t n) {
  if (n > 0) k_gelu_forward<<<blocks_for(n), 256, 0, l.stream>>>(out, inp, n);
}
void gelu_backward(Launch l, float* dinp, const float* inp, const float* dout, int64_t n) {
  if (n > 0) k_gelu_backward<<<blocks_for(n), 256, 0, l.stream>>>(dinp, inp, dout, n);
}
void swiglu_forward(Launch l, float* out, const float* inp, int64_t N, int64_t H) {
  if (N * H > 0) k_swiglu_forward<<<blocks_for(N * H), 256, 0, l.stream>>>(out, inp, N, H);
}
void swiglu_backward(Launch l, float* dinp, const float* dout, const float* inp, int64_t N, int64_t H) {
  if (N * H > 0) k_swiglu_backward<<<blocks_for(N * H), 256, 0, l.stream>>>(dinp, dout, inp, N, H);
}
void rope_forward_at(Launch l, float* qkv, int64_t B, int64_t T, int64_t pos0, int64_t NH, int64_t NKV, int64_t HS,
                     float theta) {
  rope(l, qkv, B, T, pos0, NH, NKV, HS, theta, 1.0f);
}
void rope_backward_at(Launch l, float* dqkv, int64_t B, int64_t T, int64_t pos0, int64_t NH, int64_t NKV, int64_t HS,
                      float theta) {
  rope(l, dqkv, B, T, pos0, NH, NKV, HS, theta, -1.0f);  // a rotation's transpose: the opposite angle
}
void matmul_bias_backward(Launch l, float* dbias, const float* dout, int64_t N, int64_t OC) {
  if (OC > 0) k_bias_backward<<<blocks_for(OC, 64), 64, 0, l.stream>>>(dbias, dout, N, OC);
}

void bias_broadcast(Launch l, float* out, const float* bias, int64_t N, int64_t OC) {
  if (N * OC > 0) k_bias_broadcast<<<blocks_for(N * OC), 256, 0, l.stream>>>(out, bias, N, OC);
}
void embedding_forward(Launch l, float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B,
                       int64_t T, int64_t C) {
  embedding_forward_range(l, out, tokens, wte, wpe, B, T, C, 0, INT64_MAX);
}
void embedding_backward(Launch l, float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B,
                        int64_t T, int64_t C) {
  embedding_backward_range(l, dwte, dwpe, dout, tokens, B, T, C, 0, INT64_MAX);
}
void rope_forward(Launch l, float* qkv, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS, float theta) {
  rope(l, qkv, B, T, 0, NH, NKV, HS, theta, 1.0f);
}
void rope_backward(Launch l, float* dqkv, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS, float theta) {
  rope(l, dqkv, B, T, 0, NH, NKV, HS, theta, -1.0f);
}

}  // namespace tessera::cuda
