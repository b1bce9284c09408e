// The op contract: forward/backward pairs over raw f32 pointers (llm.c style: outputs first,
// sizes last, gradients named d*). The CPU implementation (backend/cpu/) is the reference for every
// future backend. Conventions:
//  * N = B*T rows; row-major everywhere; a shape comment names each buffer.
//  * Every backward ACCUMULATES (+=) into its d* outputs, parameters and inputs alike; the caller
//    zeroes them. This makes residual branches and gradient accumulation free.
//  * Through a CpuBackend no op allocates after its first call with a given size: the kernels' scratch
//    is the backend's (cpu/cpu_workspace.h) and only grows. The free functions below of the ops that
//    need scratch (rope, attention, the linear layer and the reduced-precision matmuls: cpu/sgemm_padded.h,
//    cpu/matmul_lowp.h) take a fresh one per call: for tests and one-off calls, not for a loop.
//  * Results depend only on inputs and the OpenMP thread count (no atomics in reductions).
#pragma once
#include <cstdint>

namespace tessera::ops {

// ---- matmul (oneDNN sgemm) ----
// Row-major C(M,N) = alpha * op(A) * op(B) + beta * C; op(X) = X or X^T.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// out(N,OC) = inp(N,C) @ weight(OC,C)^T + bias(OC); bias may be null.
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N, int64_t C,
                    int64_t OC);
// dinp(N,C) += dout @ weight; dweight(OC,C) += dout^T @ inp; dbias(OC) += sum_rows(dout).
// Any of dinp / dweight / dbias may be null (skipped): a split backward computes dinp in one call
// and dweight, dbias in another, with the bits of the single call.
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t N, int64_t C, int64_t OC);

// ---- reduced-precision matmul (autocast semantics; cpu/matmul_lowp.cpp) ----
// fp32: exactly sgemm / matmul_forward / matmul_backward (same calls, same bits). bf16 / fp16: both
// matmul operands (activations, weights, output gradients) are first rounded to bf16 / IEEE half
// (round-to-nearest-even; fp16 overflows to +-inf above 65504), the products of the rounded values
// are accumulated in f32 and the outputs are f32. Bias adds and bias gradients stay f32.
// bf16 runs oneDNN's bf16 matmul primitive when the CPU has AVX512-BF16 or AMX (and oneDNN picks a
// native kernel for it); otherwise, and always for fp16, it rounds into f32 scratch and calls sgemm
// on the rounded values (numerically the same model up to f32 summation order). Whether bf16 may use
// the native kernel is a setting of the CpuBackend (CpuBackend::set_bf16_gemm_native, on by default;
// the free functions here always may), which also reports the kernel in use (bf16_gemm_kernel).
enum class MatmulPrecision : uint8_t { fp32, bf16, fp16 };
// out[i] = in[i] rounded to the precision and widened back to f32 (fp32: a copy). In place allowed.
void round_to_precision(float* out, const float* in, int64_t n, MatmulPrecision p);
void sgemm_lowp(MatmulPrecision p, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void matmul_forward_lowp(MatmulPrecision p, float* out, const float* inp, const float* weight, const float* bias,
                         int64_t N, int64_t C, int64_t OC);
void matmul_backward_lowp(MatmulPrecision p, float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC);

// ---- embedding ----
// out(B,T,C) = wte[tokens[b,t]] + (wpe ? wpe[t] : 0). Tokens must be in [0, V) (caller validates).
void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B, int64_t T,
                       int64_t C);
// dwte(V,C) += scatter(dout); dwpe(T,C) += sum_b dout (dwpe may be null).
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B, int64_t T,
                        int64_t C);

// ---- vocabulary-parallel embedding: wte = [E_1; ...; E_p] by vocabulary rows ----
// A shard holds rows [lo, hi) of wte as wte(hi-lo, C). out(B,T,C) = (lo <= tok < hi ? wte[tok-lo] : 0)
// + (wpe ? wpe[t] : 0). Summing the outputs of shards that cover the vocabulary, with wpe passed
// to exactly one of them, gives embedding_forward (bitwise: the other terms are +0).
void embedding_forward_range(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B,
                             int64_t T, int64_t C, int64_t lo, int64_t hi);
// dwte(hi-lo, C) += scatter of the dout rows whose token is in [lo, hi); dwpe(T,C) += sum_b dout
// (dwpe may be null). Same summation order as embedding_backward.
void embedding_backward_range(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B,
                              int64_t T, int64_t C, int64_t lo, int64_t hi);

// ---- normalisation ----
// LayerNorm over the last dim; mean(N), rstd(N) saved for backward.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int64_t C, float eps);
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C);
// RMSNorm: out = inp * rstd * weight, rstd = 1/sqrt(mean(inp^2) + eps).
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t N, int64_t C,
                     float eps);
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int64_t N, int64_t C);

// ---- activations ----
// GELU, tanh approximation (as GPT-2 / PyTorch approximate="tanh").
void gelu_forward(float* out, const float* inp, int64_t n);
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n);
// SwiGLU: inp(N, 2H) = [gate | up] per row; out(N,H) = silu(gate) * up.
void swiglu_forward(float* out, const float* inp, int64_t N, int64_t H);
void swiglu_backward(float* dinp, const float* dout, const float* inp, int64_t N, int64_t H);

// ---- rotary position embedding (in place) ----
// qkv(B,T,(NH+2*NKV)*HS) laid out [q heads | k heads | v heads] per row. Rotates q and k of every
// head by position t, pairs (i, i+HS/2) ("rotate_half" convention of Hugging Face LLaMA),
// angle = t * theta^(-2i/HS). v is untouched.
void rope_forward(float* qkv, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS, float theta);
// Applies the inverse rotation to the q and k parts of dqkv in place (the transpose of forward).
void rope_backward(float* dqkv, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS, float theta);
// The same with row t of every sequence at position pos0 + t (a context-parallel rank's chunk).
void rope_forward_at(float* qkv, int64_t B, int64_t T, int64_t pos0, int64_t NH, int64_t NKV, int64_t HS, float theta);
void rope_backward_at(float* dqkv, int64_t B, int64_t T, int64_t pos0, int64_t NH, int64_t NKV, int64_t HS,
                      float theta);

// ---- causal self-attention, blockwise (no T x T matrix per layer) ----
// qkv(B,T,(NH+2*NKV)*HS) as above; query head h reads kv head h / (NH/NKV) (grouped-query).
// out(B,T,NH*HS); lse(B,NH,T) = log-sum-exp of each query's scaled scores, saved for backward.
// scale = 1/sqrt(HS). Each thread holds one block of scores at a time.
void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t NH, int64_t NKV,
                       int64_t HS);
// dqkv(B,T,(NH+2*NKV)*HS) += gradient; recomputes the scores blockwise from qkv and lse.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                        int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS);

// ---- attention of one (query chunk, kv chunk) pair: ring context parallelism ----
// Attention of one (query chunk, kv chunk) pair with a log-sum-exp merge into a running (out, lse):
// the per-step kernel of ring context parallelism, forward and backward. One build, not one per
// instruction-set level: the work is in sgemm, which dispatches itself (cpu/attention_block.cpp).
//
// Why this shape: in ring attention a rank keeps its query chunk and sees the kv chunks one at a
// time, in an order the ring decides. Each step only needs the partial softmax of that pair,
// and (out, lse) is enough state to combine partials exactly, in any order:
//   lse' = log(exp(lse) + exp(lse_blk)),  out' = exp(lse - lse') out + exp(lse_blk - lse') out_blk.
// The backward needs no merge at all: with the FINAL lse, P = exp(s - lse) of each pair is already
// that pair's slice of the whole softmax, so the gradients of the pairs simply add.
//
// Layouts (rows are row-major, row = b*T + t of the chunk, so a chunk is its own (B, T, ...) buffer):
//   q rows: B x Tq rows of pitch q_stride floats; query head h at q + row*q_stride + h*HS (NH heads).
//   k, v rows: B x Tk rows of pitch kv_stride; kv head g at k + row*kv_stride + g*HS (NKV heads).
//   Query head h reads kv head h / (NH/NKV) (grouped-query). scale = 1/sqrt(HS).
// Pointing q, k, v at the column offsets of one qkv(B, T, (NH+2*NKV)*HS) chunk, stride = its row
// width, reads the [q heads | k heads | v heads] layout of ops::attention_forward in place.
//
// Every call allocates its own scratch (two blocks of 128 x Tk floats per task); the products run
// through sgemm in f32, the softmax sums and merge weights in double. Results depend only on the
// inputs (each output element is written by one OpenMP task in a fixed order).
// The two masks a ring needs: `full` when the kv chunk lies wholly before the query chunk (every query
// sees every key), `causal` for the diagonal pair (same chunk, Tq == Tk, query i sees keys 0..i).
enum class BlockMask { full, causal };

// out(B,Tq,NH*HS) and lse(B,NH,Tq) are running accumulators: start from out = 0, lse = -inf; each call
// merges this block's softmax-weighted values in (log-sum-exp merge), so after all visible kv blocks,
// in any order, out and lse equal full causal attention's output and lse (ops::attention_forward).
void attention_block_forward(float* out, float* lse, const float* q, int64_t q_stride, const float* k,
                             const float* v, int64_t kv_stride, int64_t B, int64_t Tq, int64_t Tk, int64_t NH,
                             int64_t NKV, int64_t HS, BlockMask mask);

// delta(B,NH,Tq) = rowsum(dout * out) per head, dout and out (B,Tq,NH*HS). It depends only on the final
// out, so a ring computes it once per query chunk, not once per pair.
void attention_block_delta(float* delta, const float* dout, const float* out, int64_t B, int64_t Tq, int64_t NH,
                           int64_t HS);

// Gradient contribution of one block pair, given the FINAL lse(B,NH,Tq) and delta(B,NH,Tq):
//   P = exp(scale*q.k - lse), dv += P^T dout, dP = dout v^T, dS = P*(dP - delta),
//   dq += scale * dS k, dk += scale * dS^T q.
// dq has q's layout with pitch dq_stride; dk, dv have k's / v's layout with pitch dkv_stride (so they can
// be the column offsets of a qkv-shaped dqkv chunk). Accumulates (+=) into dq, dk, dv. Parallel over
// (b, kv head) with the group's query heads looped inside, so dk/dv, shared by a group, have one writer.
void attention_block_backward(float* dq, int64_t dq_stride, float* dk, float* dv, int64_t dkv_stride,
                              const float* dout, const float* q, int64_t q_stride, const float* k, const float* v,
                              int64_t kv_stride, const float* lse, const float* delta, int64_t B, int64_t Tq,
                              int64_t Tk, int64_t NH, int64_t NKV, int64_t HS, BlockMask mask);


// ---- fused softmax + cross-entropy ----
// logits(N,V). losses(N) = -log softmax(logits)[target]; rows with target < 0 are ignored (loss 0).
// When dlogits_scale != 0, the logits are OVERWRITTEN in place by the gradient
// dloss/dlogits * dlogits_scale = (softmax - onehot(target)) * dlogits_scale (zero for ignored rows),
// so the (N,V) probabilities never need a buffer of their own.
void softmax_crossentropy(float* losses, float* logits, const int32_t* targets, int64_t N, int64_t V,
                          float dlogits_scale);

// ---- vocabulary-parallel cross-entropy: logits Z = [Z_1 ... Z_p] split by vocabulary columns ----
// A shard: logits(N, Vl) = columns [lo, lo+Vl) of Z; only the first `valid` columns are real, the
// rest (vocabulary padding) count as -inf. With m = max_r row_max_r (all-reduce MAX) and
// [s, zt] = sum_r stats_r (all-reduce SUM), loss = log(s) - zt and dZ_r = softmax_r - onehot_r:
// the split form of softmax_crossentropy that never gathers Z.
// 1. row_max(N) = max over the valid columns of each row (-inf when valid == 0).
void crossentropy_rowmax(float* row_max, const float* logits, int64_t N, int64_t Vl, int64_t valid);
// 2. stats(N,2) = [sum_{j<valid} exp(z_j - m), z_target - m if target in [lo, lo+valid) else 0],
// m = row_max (the global one); rows with target < 0 get [0, 0]. Sums in double, stored as f32.
void crossentropy_sumexp_target(float* stats, const float* logits, const float* row_max, const int32_t* targets,
                                int64_t N, int64_t Vl, int64_t valid, int64_t lo);
// 3. From the global row_max(N) and stats(N,2): losses(N) = log(s) - zt (0 for target < 0). When
// dlogits_scale != 0 the logits are OVERWRITTEN by (softmax - onehot(target)) * dlogits_scale over
// this shard (padding columns and ignored rows 0), as softmax_crossentropy does.
void crossentropy_finish(float* losses, float* logits, const float* stats, const float* row_max,
                         const int32_t* targets, int64_t N, int64_t Vl, int64_t valid, int64_t lo,
                         float dlogits_scale);

// ---- optimizer ----
// Fused AdamW with decoupled weight decay, as torch.optim.AdamW, on g = grads * grad_scale (the
// data-parallel average and the clipping factor, applied here instead of in passes of their own;
// the same bits as scaling grads first):
//   p -= lr*wd*p; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
//   p -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps),   t = step >= 1.
void adamw_update(float* params, const float* grads, float* m, float* v, int64_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int64_t step, float grad_scale);

// ---- gradient clipping ----
// Sum of squares in double, deterministic for a given thread count.
double sum_of_squares(const float* x, int64_t n);
void scale_inplace(float* x, int64_t n, float s);

// ---- element-wise (cpu/elementwise.cpp) ----
void fill(float* x, int64_t n, float value);
void copy(float* dst, const float* src, int64_t n);  // ranges may overlap
// out = y + x; out may be y (then y += x).
void add(float* out, const float* y, const float* x, int64_t n);
// y += a * x.
void axpy(float* y, float a, const float* x, int64_t n);
// How many of x[0, n) are NaN or +-inf.
int64_t count_nonfinite(const float* x, int64_t n);
// out = a - b.
void sub(float* out, const float* a, const float* b, int64_t n);

// ---- bf16 storage (cpu/bf16_casts.cpp): round to nearest even as core/dtype.h, NaN kept quiet ----
// out = bf16(in). In place allowed (out over in's first half: the CPU runs front to back).
void cast_f32_to_bf16(uint16_t* out, const float* in, int64_t n);
// out = f32(in). In place allowed (in over out's first half: the CPU runs back to front).
void cast_bf16_to_f32(float* out, const uint16_t* in, int64_t n);
// out = x - f32(y): what a bf16 cast dropped (error feedback). out may be x.
void sub_bf16(float* out, const float* x, const uint16_t* y, int64_t n);
// out += scale * f32(in).
void accumulate_bf16(float* out, float scale, const uint16_t* in, int64_t n);

// ---- gather / scatter (cpu/gather_scatter.cpp) ----
// out[j] = x[idx[j]] for j < k.
void gather(float* out, const float* x, const int32_t* idx, int64_t k);
// out[idx[j]] += scale * val[j], in j order (repeated indices add up).
void scatter_add(float* out, float scale, const int32_t* idx, const float* val, int64_t k);
// out[idx[j]] = value.
void scatter_fill(float* out, const int32_t* idx, int64_t k, float value);
// x(rows, cols): mask[r] = 1 when row r holds an element other than +-0, else 0.
void nonzero_rows(int32_t* mask, const float* x, int64_t rows, int64_t cols);
// out(k, cols): row j = row idx[j] of x. out may be x when idx is ascending (packs rows to the front).
void gather_rows(float* out, const float* x, const int64_t* idx, int64_t k, int64_t cols);
// Row idx[j] of out += row j of x(k, cols).
void scatter_add_rows(float* out, const int64_t* idx, const float* x, int64_t k, int64_t cols);

// ---- mixture-of-experts routing (cpu/moe_routing.cpp; model/transformer_moe.cpp) ----
// N tokens, E experts, top-K routing. The expert matmuls themselves are matmul_forward/backward over
// each expert's contiguous slots, between gather_rows (dispatch) and moe_combine (weighted scatter).
// probs(N,E) = softmax(logits) row-wise in f32 (probs may be logits: in place); lse(N) = log-sum-exp
// of each logits row (the z-loss's input). topk_idx(N,K): the K experts of largest probability in
// descending order, ties to the lower expert index; topk_w(N,K) = their probabilities divided by
// their sum (Mixtral's renormalised top-k; K = 1 gives weight 1).
void moe_router_forward(float* probs, float* lse, int32_t* topk_idx, float* topk_w, const float* logits, int64_t N,
                        int64_t E, int64_t K);
// The dispatch plan of topk_idx(N,K). routed(E): assignments per expert before dropping. Each
// expert takes its assignments by priority -- all first choices (k = 0) in token order, then the
// second choices in token order, ... -- and keeps the first `capacity` (capacity <= 0: all,
// dropless). counts(E): kept per expert; slot_token(N*K, int64): the token row of each slot, slots
// grouped by expert in expert order and by priority within one (the first sum(counts) are used);
// slot_of(N,K): the slot of assignment (n, k), or -1 when it was dropped.
void moe_dispatch_plan(int64_t* slot_token, int32_t* slot_of, int32_t* counts, int32_t* routed,
                       const int32_t* topk_idx, int64_t N, int64_t E, int64_t K, int64_t capacity);
// out(N,C) = sum over k of topk_w[n,k] * y[slot_of[n,k]] (kept assignments, in k order; a token with
// none gets 0). OVERWRITES out. y(S,C): the experts' outputs by slot.
void moe_combine_forward(float* out, const float* y, const int32_t* slot_of, const float* topk_w, int64_t N,
                         int64_t K, int64_t C);
// dy(S,C) row slot_of[n,k] += topk_w[n,k] * dout[n]; dtopk_w(N,K) += dot(dout[n], y[slot_of[n,k]])
// (nothing for dropped assignments).
void moe_combine_backward(float* dy, float* dtopk_w, const float* dout, const float* y, const int32_t* slot_of,
                          const float* topk_w, int64_t N, int64_t K, int64_t C);
// stats(3) = [load-balancing loss, z-loss, mean router entropy] of one layer, without coefficients:
// lb = E * sum_e (routed_e / N) * mean_n probs[n,e] (Hugging Face Mixtral's load_balancing_loss_func
// for one layer: K at a uniform router), z = mean_n lse_n^2 (ST-MoE), entropy = mean_n -sum_e p ln p.
// OVERWRITES stats. Sums in double.
void moe_router_stats(float* stats, const float* probs, const float* lse, const int32_t* routed, int64_t N,
                      int64_t E);
// dlogits(N,E) += the gradient through the softmax of: the combine weights' gradient dtopk_w (N,K)
// (through the renormalisation), plus scale * (aux_coef * lb + z_coef * z) with routed counts held
// constant (as every implementation of the load-balancing loss does).
void moe_router_backward(float* dlogits, const float* dtopk_w, const float* probs, const float* lse,
                         const int32_t* topk_idx, const float* topk_w, const int32_t* routed, int64_t N, int64_t E,
                         int64_t K, float aux_coef, float z_coef, float scale);

// ---- the step's loss (cpu/step_loss.cpp): it stays on the device until the step ends ----
void fill_f64(double* x, int64_t n, double value);
// *loss_sum += the mean of losses[0, n) over `valid` rows (0 when valid == 0), rounded to f32 first
// (the micro-batch loss Transformer::forward returns). The row sum runs in double, in row order.
void accumulate_mean_loss(double* loss_sum, const float* losses, int64_t n, int64_t valid);

// ---- gradient compression (cpu/compression_kernels.cpp; parallel/compression*.h) ----
// Top-k: the k indices of the largest |m[i]| (ties by index), ascending, into idx[0, k);
// scratch holds n int32 (overwritten).
void topk_select(int32_t* idx, int32_t* scratch, const float* m, int64_t n, int64_t k);
// 1-bit: per chunk of `chunk` elements the mean |m| (scales[c]) and each element's sign (bit set:
// m >= 0, packed 32 to a word); residual (may be null) = m - the decoded value.
void onebit_compress(float* scales, uint32_t* words, float* residual, const float* m, int64_t n, int64_t chunk);
// out[i] += scale * (decoded 1-bit value of element i).
void onebit_accumulate(float* out, float scale, const float* scales, const uint32_t* words, int64_t n, int64_t chunk);
// PowerSGD: the r columns of the row-major (rows, r) matrix a made orthonormal in place (modified
// Gram-Schmidt in double); a column left with (almost) nothing after the projections becomes zero.
void orthonormalise_columns(float* a, int64_t rows, int64_t r);

// ---- local SGD's outer optimizer (torch.optim.SGD's rule on the outer gradient delta) ----
//   v = momentum * v + delta;  anchor -= lr * (nesterov ? delta + momentum * v : v)
void outer_sgd_update(float* anchor, float* velocity, const float* delta, int64_t n, float lr, float momentum,
                      bool nesterov);

}  // namespace tessera::ops
