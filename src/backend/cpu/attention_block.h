// Attention of one (query chunk, kv chunk) pair with a log-sum-exp merge into a running (out, lse):
// the per-step kernel of ring context parallelism, forward and backward. Plain portable C++ (one
// build, not one per instruction-set level); not yet an op of backend/ops.h.
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
// Every call allocates its own scratch (O(Tk*HS) doubles per task) and accumulates in double; results
// depend only on the inputs (each output element is written by one OpenMP task in a fixed order).
#pragma once
#include <cstdint>

namespace tessera {

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

}  // namespace tessera
