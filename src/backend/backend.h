// Backend: one per rank, chosen at set-up by train.device and passed by reference (like Grid). It
// holds every op of the contract in backend/ops.h -- declared once, in TESSERA_BACKEND_OPS, so a
// backend that misses one does not compile -- plus the copies across the host/device line and the
// synchronisation points that let communication overlap compute on another stream.
//
// CpuBackend (cpu/cpu_backend.h) forwards to the CPU kernels, the oracle for every other backend.
// Pointers given to the ops are device pointers of this backend (host pointers for the CPU).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "backend/device_assignment.h"
#include "backend/ops.h"
#include "core/memory.h"
#include "core/status.h"
#include "core/tensor.h"  // Device

namespace tessera {

// The op list: X(name, return type, (parameters), (arguments)). Semantics as in backend/ops.h.
#define TESSERA_BACKEND_OPS(X)                                                                                      \
  X(sgemm, void,                                                                                                     \
    (bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,          \
     const float* B, int64_t ldb, float beta, float* C, int64_t ldc),                                               \
    (trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))                                               \
  X(matmul_forward, void,                                                                                            \
    (float* out, const float* inp, const float* weight, const float* bias, int64_t N, int64_t C, int64_t OC),        \
    (out, inp, weight, bias, N, C, OC))                                                                             \
  X(matmul_backward, void,                                                                                           \
    (float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, const float* weight, int64_t N, \
     int64_t C, int64_t OC),                                                                                         \
    (dinp, dweight, dbias, dout, inp, weight, N, C, OC))                                                            \
  X(round_to_precision, void, (float* out, const float* in, int64_t n, ops::MatmulPrecision p), (out, in, n, p))     \
  X(matmul_forward_lowp, void,                                                                                       \
    (ops::MatmulPrecision p, float* out, const float* inp, const float* weight, const float* bias, int64_t N,        \
     int64_t C, int64_t OC),                                                                                         \
    (p, out, inp, weight, bias, N, C, OC))                                                                          \
  X(matmul_backward_lowp, void,                                                                                      \
    (ops::MatmulPrecision p, float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,          \
     const float* weight, int64_t N, int64_t C, int64_t OC),                                                         \
    (p, dinp, dweight, dbias, dout, inp, weight, N, C, OC))                                                         \
  X(embedding_forward, void,                                                                                         \
    (float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B, int64_t T, int64_t C),        \
    (out, tokens, wte, wpe, B, T, C))                                                                               \
  X(embedding_backward, void,                                                                                        \
    (float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B, int64_t T, int64_t C),           \
    (dwte, dwpe, dout, tokens, B, T, C))                                                                            \
  X(embedding_forward_range, void,                                                                                   \
    (float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B, int64_t T, int64_t C,         \
     int64_t lo, int64_t hi),                                                                                        \
    (out, tokens, wte, wpe, B, T, C, lo, hi))                                                                       \
  X(embedding_backward_range, void,                                                                                  \
    (float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B, int64_t T, int64_t C, int64_t lo, \
     int64_t hi),                                                                                                    \
    (dwte, dwpe, dout, tokens, B, T, C, lo, hi))                                                                    \
  X(layernorm_forward, void,                                                                                         \
    (float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias, int64_t N,      \
     int64_t C, float eps),                                                                                          \
    (out, mean, rstd, inp, weight, bias, N, C, eps))                                                                \
  X(layernorm_backward, void,                                                                                        \
    (float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, const float* weight,            \
     const float* mean, const float* rstd, int64_t N, int64_t C),                                                    \
    (dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C))                                                    \
  X(rmsnorm_forward, void,                                                                                           \
    (float* out, float* rstd, const float* inp, const float* weight, int64_t N, int64_t C, float eps),               \
    (out, rstd, inp, weight, N, C, eps))                                                                            \
  X(rmsnorm_backward, void,                                                                                          \
    (float* dinp, float* dweight, const float* dout, const float* inp, const float* weight, const float* rstd,       \
     int64_t N, int64_t C),                                                                                          \
    (dinp, dweight, dout, inp, weight, rstd, N, C))                                                                 \
  X(gelu_forward, void, (float* out, const float* inp, int64_t n), (out, inp, n))                                    \
  X(gelu_backward, void, (float* dinp, const float* inp, const float* dout, int64_t n), (dinp, inp, dout, n))        \
  X(swiglu_forward, void, (float* out, const float* inp, int64_t N, int64_t H), (out, inp, N, H))                    \
  X(swiglu_backward, void, (float* dinp, const float* dout, const float* inp, int64_t N, int64_t H),                 \
    (dinp, dout, inp, N, H))                                                                                         \
  X(rope_forward, void, (float* qkv, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS, float theta),        \
    (qkv, B, T, NH, NKV, HS, theta))                                                                                \
  X(rope_backward, void, (float* dqkv, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS, float theta),      \
    (dqkv, B, T, NH, NKV, HS, theta))                                                                               \
  X(rope_forward_at, void,                                                                                           \
    (float* qkv, int64_t B, int64_t T, int64_t pos0, int64_t NH, int64_t NKV, int64_t HS, float theta),              \
    (qkv, B, T, pos0, NH, NKV, HS, theta))                                                                          \
  X(rope_backward_at, void,                                                                                          \
    (float* dqkv, int64_t B, int64_t T, int64_t pos0, int64_t NH, int64_t NKV, int64_t HS, float theta),             \
    (dqkv, B, T, pos0, NH, NKV, HS, theta))                                                                         \
  X(attention_block_forward, void,                                                                                   \
    (float* out, float* lse, const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride,    \
     int64_t B, int64_t Tq, int64_t Tk, int64_t NH, int64_t NKV, int64_t HS, ops::BlockMask mask),                   \
    (out, lse, q, q_stride, k, v, kv_stride, B, Tq, Tk, NH, NKV, HS, mask))                                         \
  X(attention_block_delta, void,                                                                                     \
    (float* delta, const float* dout, const float* out, int64_t B, int64_t Tq, int64_t NH, int64_t HS),              \
    (delta, dout, out, B, Tq, NH, HS))                                                                              \
  X(attention_block_backward, void,                                                                                  \
    (float* dq, int64_t dq_stride, float* dk, float* dv, int64_t dkv_stride, const float* dout, const float* q,      \
     int64_t q_stride, const float* k, const float* v, int64_t kv_stride, const float* lse, const float* delta,      \
     int64_t B, int64_t Tq, int64_t Tk, int64_t NH, int64_t NKV, int64_t HS, ops::BlockMask mask),                   \
    (dq, dq_stride, dk, dv, dkv_stride, dout, q, q_stride, k, v, kv_stride, lse, delta, B, Tq, Tk, NH, NKV, HS,      \
     mask))                                                                                                          \
  X(attention_forward, void,                                                                                         \
    (float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS),           \
    (out, lse, qkv, B, T, NH, NKV, HS))                                                                             \
  X(attention_backward, void,                                                                                        \
    (float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse, int64_t B, int64_t T,     \
     int64_t NH, int64_t NKV, int64_t HS),                                                                           \
    (dqkv, dout, qkv, out, lse, B, T, NH, NKV, HS))                                                                 \
  X(softmax_crossentropy, void,                                                                                      \
    (float* losses, float* logits, const int32_t* targets, int64_t N, int64_t V, float dlogits_scale),               \
    (losses, logits, targets, N, V, dlogits_scale))                                                                 \
  X(crossentropy_rowmax, void, (float* row_max, const float* logits, int64_t N, int64_t Vl, int64_t valid),          \
    (row_max, logits, N, Vl, valid))                                                                                \
  X(crossentropy_sumexp_target, void,                                                                                \
    (float* stats, const float* logits, const float* row_max, const int32_t* targets, int64_t N, int64_t Vl,         \
     int64_t valid, int64_t lo),                                                                                     \
    (stats, logits, row_max, targets, N, Vl, valid, lo))                                                            \
  X(crossentropy_finish, void,                                                                                       \
    (float* losses, float* logits, const float* stats, const float* row_max, const int32_t* targets, int64_t N,      \
     int64_t Vl, int64_t valid, int64_t lo, float dlogits_scale),                                                    \
    (losses, logits, stats, row_max, targets, N, Vl, valid, lo, dlogits_scale))                                     \
  X(adamw_update, void,                                                                                              \
    (float* params, const float* grads, float* m, float* v, int64_t n, float lr, float beta1, float beta2, float eps, \
     float weight_decay, int64_t step, float grad_scale),                                                            \
    (params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, step, grad_scale))                                \
  X(sum_of_squares, double, (const float* x, int64_t n), (x, n))                                                     \
  X(scale_inplace, void, (float* x, int64_t n, float s), (x, n, s))                                                  \
  X(fill, void, (float* x, int64_t n, float value), (x, n, value))                                                   \
  X(copy, void, (float* dst, const float* src, int64_t n), (dst, src, n))                                            \
  X(add, void, (float* out, const float* y, const float* x, int64_t n), (out, y, x, n))                              \
  X(axpy, void, (float* y, float a, const float* x, int64_t n), (y, a, x, n))                                        \
  X(count_nonfinite, int64_t, (const float* x, int64_t n), (x, n))                                                 \
  X(sub, void, (float* out, const float* a, const float* b, int64_t n), (out, a, b, n))                              \
  X(cast_f32_to_bf16, void, (uint16_t * out, const float* in, int64_t n), (out, in, n))                              \
  X(cast_bf16_to_f32, void, (float* out, const uint16_t* in, int64_t n), (out, in, n))                               \
  X(sub_bf16, void, (float* out, const float* x, const uint16_t* y, int64_t n), (out, x, y, n))                      \
  X(accumulate_bf16, void, (float* out, float scale, const uint16_t* in, int64_t n), (out, scale, in, n))            \
  X(gather, void, (float* out, const float* x, const int32_t* idx, int64_t k), (out, x, idx, k))                     \
  X(scatter_add, void, (float* out, float scale, const int32_t* idx, const float* val, int64_t k),                   \
    (out, scale, idx, val, k))                                                                                       \
  X(scatter_fill, void, (float* out, const int32_t* idx, int64_t k, float value), (out, idx, k, value))              \
  X(nonzero_rows, void, (int32_t * mask, const float* x, int64_t rows, int64_t cols), (mask, x, rows, cols))         \
  X(gather_rows, void, (float* out, const float* x, const int64_t* idx, int64_t k, int64_t cols),                    \
    (out, x, idx, k, cols))                                                                                          \
  X(scatter_add_rows, void, (float* out, const int64_t* idx, const float* x, int64_t k, int64_t cols),               \
    (out, idx, x, k, cols))                                                                                          \
  X(moe_router_forward, void,                                                                                       \
    (float* probs, float* lse, int32_t* topk_idx, float* topk_w, const float* logits, int64_t N, int64_t E,          \
     int64_t K),                                                                                                     \
    (probs, lse, topk_idx, topk_w, logits, N, E, K))                                                                \
  X(moe_dispatch_plan, void,                                                                                        \
    (int64_t * slot_token, int32_t * slot_of, int32_t * counts, int32_t * routed, const int32_t* topk_idx,           \
     int64_t N, int64_t E, int64_t K, int64_t capacity),                                                             \
    (slot_token, slot_of, counts, routed, topk_idx, N, E, K, capacity))                                             \
  X(moe_combine_forward, void,                                                                                      \
    (float* out, const float* y, const int32_t* slot_of, const float* topk_w, int64_t N, int64_t K, int64_t C),      \
    (out, y, slot_of, topk_w, N, K, C))                                                                             \
  X(moe_combine_backward, void,                                                                                     \
    (float* dy, float* dtopk_w, const float* dout, const float* y, const int32_t* slot_of, const float* topk_w,      \
     int64_t N, int64_t K, int64_t C),                                                                               \
    (dy, dtopk_w, dout, y, slot_of, topk_w, N, K, C))                                                               \
  X(moe_router_stats, void,                                                                                         \
    (float* stats, const float* probs, const float* lse, const int32_t* routed, int64_t N, int64_t E),               \
    (stats, probs, lse, routed, N, E))                                                                              \
  X(moe_router_backward, void,                                                                                      \
    (float* dlogits, const float* dtopk_w, const float* probs, const float* lse, const int32_t* topk_idx,             \
     const float* topk_w, const int32_t* routed, int64_t N, int64_t E, int64_t K, float aux_coef, float z_coef,      \
     float scale),                                                                                                   \
    (dlogits, dtopk_w, probs, lse, topk_idx, topk_w, routed, N, E, K, aux_coef, z_coef, scale))                     \
  X(topk_select, void, (int32_t * idx, int32_t * scratch, const float* m, int64_t n, int64_t k),                 \
    (idx, scratch, m, n, k))                                                                                         \
  X(onebit_compress, void,                                                                                           \
    (float* scales, uint32_t* words, float* residual, const float* m, int64_t n, int64_t chunk),                     \
    (scales, words, residual, m, n, chunk))                                                                          \
  X(onebit_accumulate, void,                                                                                         \
    (float* out, float scale, const float* scales, const uint32_t* words, int64_t n, int64_t chunk),                 \
    (out, scale, scales, words, n, chunk))                                                                           \
  X(orthonormalise_columns, void, (float* a, int64_t rows, int64_t r), (a, rows, r))                                \
  X(outer_sgd_update, void,                                                                                          \
    (float* anchor, float* velocity, const float* delta, int64_t n, float lr, float momentum, bool nesterov),        \
    (anchor, velocity, delta, n, lr, momentum, nesterov))                                                           \
  X(fill_f64, void, (double* x, int64_t n, double value), (x, n, value))                                             \
  X(accumulate_mean_loss, void, (double* loss_sum, const float* losses, int64_t n, int64_t valid),                  \
    (loss_sum, losses, n, valid))

std::string_view device_name(Device d);  // "cpu", "cuda"
// "cpu" or "cuda"; anything else is an error naming the choices.
Result<Device> parse_device(std::string_view name);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;

#define TESSERA_DECLARE_BACKEND_OP(name, ret, params, args) virtual ret name params = 0;
  TESSERA_BACKEND_OPS(TESSERA_DECLARE_BACKEND_OP)
#undef TESSERA_DECLARE_BACKEND_OP

  // Copies across the host/device line (bytes; `device` is memory of this backend). Named points:
  // checkpoints, replica hashes, initialisation, import/export and tokens cross here.
  virtual void copy_to_device(void* device, const void* host, size_t bytes) = 0;
  virtual void copy_to_host(void* host, const void* device, size_t bytes) = 0;
  // Whether `p` points into memory the host cannot read directly (a GPU's): what a communicator
  // over host buffers must stage (comm/staged_communicator.h). The CPU's memory is host memory.
  virtual bool is_device_memory(const void* p) const = 0;
  // Waits until every op issued so far has completed (the CPU's ops complete when they return).
  virtual void synchronize() = 0;

  // ---- memory of this backend, by category ----
  // `bytes` of this backend's memory, zeroed, counted in memory_counters() under `category` (the
  // CPU's is host memory: counted in core's memory_stats() too). paged: reserved address space whose
  // pages become resident where touched and can be handed back (Buffer::zero_range, discard_range;
  // Buffer::sample_residency measures them); on a GPU, virtual memory with pages mapped on demand.
  // The backend must outlive its buffers.
  virtual Buffer allocate(size_t bytes, MemCategory category, Residency residency = Residency::resident) = 0;
  // Live and peak bytes of this backend's memory by category (paged: as last sampled).
  virtual MemoryStats memory_counters() const = 0;

  // ---- streams and events ----
  // Ops run in issue order on the current stream; communication goes on its own stream so that it
  // overlaps compute. set_stream makes later ops (and copies) run on `s` and returns the previous one
  // (StreamScope below). An event marks everything issued to a stream so far: record it there, and
  // wait_event makes another stream wait for it before its later work (not the host: that is
  // synchronize_event). The CPU's ops complete when they return, so there its events are already
  // reached and the waits return at once; a device backend implements them with its streams/events.
  enum class Stream : uint8_t { compute, communication };
  struct Event {
    uint64_t id = 0;
  };
  virtual Stream set_stream(Stream s) = 0;
  virtual Event record_event(Stream s) = 0;
  virtual void wait_event(Stream waiter, Event e) = 0;
  virtual void synchronize_event(Event e) = 0;
};

// Runs what it scopes on one stream: { StreamScope on(be, Backend::Stream::communication); ... }
class StreamScope {
 public:
  StreamScope(Backend& be, Backend::Stream s) : be_(be), previous_(be.set_stream(s)) {}
  ~StreamScope() { be_.set_stream(previous_); }
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  Backend& be_;
  Backend::Stream previous_;
};

// What this build has for GPUs, for --version and the start-up banner: "CUDA off", or "CUDA on
// (sm_90); device 0: NVIDIA H200 (...)" / "...; no CUDA device visible".
std::string cuda_build_summary();

// The backend for train.device; a GPU's is the device assign_device picks for this rank. A device
// this build has no backend for is an error naming what the build has.
Result<std::unique_ptr<Backend>> make_backend(Device device, NodeRank rank = {});

}  // namespace tessera
