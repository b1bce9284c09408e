// Causal self-attention (multi-head and grouped-query), blockwise in the FlashAttention-2 manner:
// scores exist one 64 x 64 block at a time, with an online softmax in the forward pass and the
// probabilities recomputed from the saved log-sum-exp in the backward pass.
//
// Blocks are held transposed (key rows x query columns) so that every per-query quantity (running
// max, sum, lse, D) is a 64-wide vector and every matmul is vectorised over a 64-wide block
// dimension or over the head size (kernels in attention_gemm.cpp). The forward pass transposes each
// Q block into scratch and reads K, V in place; the backward pass gathers a whole head's Q, dO, K
// into per-thread scratch (linear in T) whose rows it reads as matmul operands. All scratch is the
// caller's workspace (cpu_workspace.h): one AlignedScratch per OpenMP thread, D in attention_D.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/attention_schedule.h"
#include "backend/ops.h"
#include "core/log.h"

#include "backend/cpu/kernel_decls.h"
#include "backend/cpu/kernel_isa_begin.h"  // after every other header but this level's own
#include "backend/cpu/attention_kernels.h"

namespace tessera::ops::TESSERA_KERNEL_NS {
namespace {

using attn::fast_exp;
using attn::gemm_bcast;
using attn::kBlock;

struct Dims {
  int64_t B, T, NH, NKV, HS;
  int64_t C3;     // qkv row width
  int64_t CO;     // out row width
  int64_t group;  // query heads per kv head
  int64_t nblk;   // blocks of kBlock rows covering T
  float scale;

  Dims(int64_t B_, int64_t T_, int64_t NH_, int64_t NKV_, int64_t HS_)
      : B(B_), T(T_), NH(NH_), NKV(NKV_), HS(HS_), C3((NH_ + 2 * NKV_) * HS_), CO(NH_ * HS_),
        group(NKV_ > 0 ? NH_ / NKV_ : 0), nblk((T_ + kBlock - 1) / kBlock),
        scale(1.0f / std::sqrt(static_cast<float>(HS_))) {
    TS_CHECK(NH > 0 && NKV > 0 && HS > 0 && NH % NKV == 0)
        << "attention needs NH a positive multiple of NKV and HS > 0, got NH=" << NH << " NKV=" << NKV
        << " HS=" << HS;
  }
  int64_t q_col(int64_t h) const { return h * HS; }
  int64_t k_col(int64_t kvh) const { return (NH + kvh) * HS; }
  int64_t v_col(int64_t kvh) const { return (NH + NKV + kvh) * HS; }
  int64_t rows_in(int64_t blk) const { return std::min(kBlock, T - blk * kBlock); }
};

// dst[d*ld + i] = s * src[i*lds + d] for i < n; columns n..kBlock-1 are zeroed so that the padded
// queries of a partial block give finite, unused scores.
void transpose_block(float* dst, int64_t ld, const float* src, int64_t lds, int64_t n, int64_t HS, float s) {
  for (int64_t i = 0; i < n; ++i) {
    const float* row = src + i * lds;
    for (int64_t d = 0; d < HS; ++d) dst[d * ld + i] = s * row[d];
  }
  for (int64_t d = 0; d < HS; ++d)
    for (int64_t i = n; i < kBlock; ++i) dst[d * ld + i] = 0.0f;
}

// Copies rows [0, n) of width HS and pitch lds into a contiguous (n, HS) array.
void copy_rows(float* dst, const float* src, int64_t lds, int64_t n, int64_t HS) {
  for (int64_t i = 0; i < n; ++i) std::copy(src + i * lds, src + i * lds + HS, dst + i * HS);
}

// ---- forward ----

// Output rows of query block qb of head h in batch b.
void forward_block(AlignedScratch& scratch, float* out, float* lse, const float* qkv, const Dims& dm, int64_t b,
                   int64_t h, int64_t qb) {
  const int64_t HS = dm.HS;
  scratch.reserve(2 * AlignedScratch::round16(HS * kBlock) + kBlock * kBlock);
  float* Qt = scratch.take(HS * kBlock);  // (HS, 64): scaled queries, transposed
  float* Ot = scratch.take(HS * kBlock);  // (HS, 64): unnormalised output, transposed
  float* St = scratch.take(kBlock * kBlock);  // (keys, queries): scores, then probabilities
  alignas(64) float m[kBlock], l[kBlock], mx[kBlock], alpha[kBlock], sum[kBlock];

  const int64_t i0 = qb * kBlock, nq = dm.rows_in(qb);
  const float* qkv_b = qkv + b * dm.T * dm.C3;
  const int64_t kvh = h / dm.group;
  transpose_block(Qt, kBlock, qkv_b + i0 * dm.C3 + dm.q_col(h), dm.C3, nq, HS, dm.scale);
  std::fill(Ot, Ot + HS * kBlock, 0.0f);
  std::fill(m, m + kBlock, -std::numeric_limits<float>::infinity());
  std::fill(l, l + kBlock, 0.0f);

  for (int64_t kb = 0; kb <= qb; ++kb) {
    const int64_t j0 = kb * kBlock, nk = dm.rows_in(kb);
    // K and V are only broadcast from (one scalar per row at a time), so they are read in place.
    const float* K = qkv_b + j0 * dm.C3 + dm.k_col(kvh);
    const float* V = qkv_b + j0 * dm.C3 + dm.v_col(kvh);
    gemm_bcast(nk, kBlock, HS, K, dm.C3, 1, Qt, kBlock, St, kBlock, false);
    if (kb == qb)  // diagonal block (i0 == j0): query i sees key j only when j <= i
      for (int64_t j = 1; j < nk; ++j)
        for (int64_t i = 0; i < j; ++i) St[j * kBlock + i] = -std::numeric_limits<float>::infinity();

    std::copy(m, m + kBlock, mx);
    for (int64_t j = 0; j < nk; ++j) {
      const float* s = St + j * kBlock;
#pragma omp simd
      for (int64_t i = 0; i < kBlock; ++i) mx[i] = s[i] > mx[i] ? s[i] : mx[i];
    }
#pragma omp simd
    for (int64_t i = 0; i < kBlock; ++i) {
      alpha[i] = fast_exp(m[i] - mx[i]);  // 0 on the first block (m = -inf)
      m[i] = mx[i];
      sum[i] = 0.0f;
    }
    for (int64_t j = 0; j < nk; ++j) {
      float* s = St + j * kBlock;
#pragma omp simd
      for (int64_t i = 0; i < kBlock; ++i) {
        const float p = fast_exp(s[i] - mx[i]);
        s[i] = p;
        sum[i] += p;
      }
    }
#pragma omp simd
    for (int64_t i = 0; i < kBlock; ++i) l[i] = l[i] * alpha[i] + sum[i];
    for (int64_t d = 0; d < HS; ++d) {
      float* o = Ot + d * kBlock;
#pragma omp simd
      for (int64_t i = 0; i < kBlock; ++i) o[i] *= alpha[i];
    }
    // Ot(HS, queries) += V^T(HS, keys) * Pt(keys, queries).
    gemm_bcast(HS, kBlock, nk, V, 1, dm.C3, St, kBlock, Ot, kBlock, true);
  }

  float* lse_h = lse + (b * dm.NH + h) * dm.T;
  for (int64_t i = 0; i < nq; ++i) {
    const float inv = 1.0f / l[i];
    lse_h[i0 + i] = m[i] + std::log(l[i]);
    float* o = out + (b * dm.T + i0 + i) * dm.CO + dm.q_col(h);
    for (int64_t d = 0; d < HS; ++d) o[d] = Ot[d * kBlock + i] * inv;
  }
}

// ---- backward ----

struct BackwardArgs {
  float* dqkv;
  const float* dout;
  const float* qkv;
  const float* lse;
  const float* D;  // (B, NH, T): rowsum(dout * out)
};

// Scratch of one block pair: probabilities and dS, both (keys, queries).
struct PairScratch {
  float* St;
  float* dPt;
};

// Where backward_pair reads its operands: the first row (or, transposed, column) of the query block
// and of the key block, each with its pitch. Either in place in qkv / dout or contiguous copies.
struct PairOperands {
  const float* Qt;   // (HS, queries): scaled queries, transposed
  const float* dOt;  // (HS, queries): output gradient, transposed
  int64_t ldt;
  const float* Q;  // (queries, HS), unscaled
  int64_t ldq;
  const float* dO;  // (queries, HS)
  int64_t ldo;
  const float* K;  // (keys, HS)
  int64_t ldk;
};

// Contributions of key block kb to query block qb of head h: dK, dV of kb when do_kv, dQ of qb when
// do_q, all accumulated straight into dqkv.
void backward_pair(const BackwardArgs& a, const Dims& dm, int64_t b, int64_t h, int64_t kb, int64_t qb,
                   const PairOperands& op, PairScratch ps, bool do_kv, bool do_q) {
  const int64_t HS = dm.HS, C3 = dm.C3;
  const int64_t i0 = qb * kBlock, nq = dm.rows_in(qb);
  const int64_t j0 = kb * kBlock, nk = dm.rows_in(kb);
  const int64_t kvh = h / dm.group;
  const float* V = a.qkv + (b * dm.T + j0) * C3 + dm.v_col(kvh);
  float* St = ps.St;
  float* dPt = ps.dPt;

  gemm_bcast(nk, kBlock, HS, op.K, op.ldk, 1, op.Qt, op.ldt, St, kBlock, false);  // S^T = K (scale Q)^T
  gemm_bcast(nk, kBlock, HS, V, C3, 1, op.dOt, op.ldt, dPt, kBlock, false);       // dP^T = V dO^T

  alignas(64) float lse_b[kBlock], D_b[kBlock];
  const float* lse_h = a.lse + (b * dm.NH + h) * dm.T + i0;
  const float* D_h = a.D + (b * dm.NH + h) * dm.T + i0;
  for (int64_t i = 0; i < kBlock; ++i) {
    lse_b[i] = i < nq ? lse_h[i] : 0.0f;
    D_b[i] = i < nq ? D_h[i] : 0.0f;
  }
  const bool diag = kb == qb;
  const float scale = dm.scale;
  for (int64_t j = 0; j < nk; ++j) {
    float* s = St + j * kBlock;
    float* dp = dPt + j * kBlock;
    const int64_t first = diag ? j : 0;  // queries before `first` cannot see key j
#pragma omp simd
    for (int64_t i = 0; i < kBlock; ++i) {
      const float p = i < first ? 0.0f : fast_exp(s[i] - lse_b[i]);
      s[i] = p;
      dp[i] = p * (dp[i] - D_b[i]) * scale;  // scale * dS, shared by dQ and dK
    }
  }

  if (do_kv) {
    float* dK = a.dqkv + (b * dm.T + j0) * C3 + dm.k_col(kvh);
    float* dV = a.dqkv + (b * dm.T + j0) * C3 + dm.v_col(kvh);
    gemm_bcast(nk, HS, nq, St, kBlock, 1, op.dO, op.ldo, dV, C3, true);  // dV += P^T dO
    gemm_bcast(nk, HS, nq, dPt, kBlock, 1, op.Q, op.ldq, dK, C3, true);  // dK += scale dS^T Q
  }
  if (do_q) {
    float* dQ = a.dqkv + (b * dm.T + i0) * C3 + dm.q_col(h);
    gemm_bcast(nq, HS, nk, dPt, 1, kBlock, op.K, op.ldk, dQ, C3, true);  // dQ += scale dS K
  }
}

// Operands of the two-pass tasks: block transposes in scratch, the rest in place.
PairOperands in_place_operands(const BackwardArgs& a, const Dims& dm, int64_t b, int64_t h, int64_t kb,
                               int64_t qb, const float* Qt, const float* dOt) {
  const int64_t i0 = qb * kBlock, j0 = kb * kBlock;
  return {Qt,
          dOt,
          kBlock,
          a.qkv + (b * dm.T + i0) * dm.C3 + dm.q_col(h),
          dm.C3,
          a.dout + (b * dm.T + i0) * dm.CO + dm.q_col(h),
          dm.CO,
          a.qkv + (b * dm.T + j0) * dm.C3 + dm.k_col(h / dm.group),
          dm.C3};
}

// Fused schedule: the task (b, kvh) owns dK, dV of kv head kvh and dQ of its query heads. The
// head's Q, dO, K are first gathered into contiguous arrays (and Q, dO also transposed): read as
// matmul rows in place, their 2-9 KiB pitch would thrash the L1 sets.
void backward_fused_task(AlignedScratch& scratch, const BackwardArgs& a, const Dims& dm, int64_t b, int64_t kvh) {
  const int64_t T = dm.T, HS = dm.HS;
  // Row pitch of the transposed head: one cache line more than the padded length, so that the rows
  // of a block do not all fall into the same L1 sets (T = 1024 would give a 4 KiB pitch).
  const int64_t Tp = dm.nblk * kBlock + 16;
  scratch.reserve(2 * AlignedScratch::round16(HS * Tp) + 3 * AlignedScratch::round16(T * HS) +
                  2 * kBlock * kBlock);
  float* Qt = scratch.take(HS * Tp);  // (HS, Tp): the whole head, transposed once
  float* dOt = scratch.take(HS * Tp);
  float* Qc = scratch.take(T * HS);  // (T, HS) contiguous
  float* dOc = scratch.take(T * HS);
  float* Kc = scratch.take(T * HS);
  PairScratch ps{scratch.take(kBlock * kBlock), scratch.take(kBlock * kBlock)};
  copy_rows(Kc, a.qkv + b * T * dm.C3 + dm.k_col(kvh), dm.C3, T, HS);
  for (int64_t h = kvh * dm.group; h < (kvh + 1) * dm.group; ++h) {
    const float* Q = a.qkv + b * T * dm.C3 + dm.q_col(h);
    const float* dO = a.dout + b * T * dm.CO + dm.q_col(h);
    copy_rows(Qc, Q, dm.C3, T, HS);
    copy_rows(dOc, dO, dm.CO, T, HS);
    for (int64_t qb = 0; qb < dm.nblk; ++qb) {
      const int64_t i0 = qb * kBlock, nq = dm.rows_in(qb);
      transpose_block(Qt + i0, Tp, Qc + i0 * HS, HS, nq, HS, dm.scale);
      transpose_block(dOt + i0, Tp, dOc + i0 * HS, HS, nq, HS, 1.0f);
    }
    for (int64_t kb = 0; kb < dm.nblk; ++kb)
      for (int64_t qb = kb; qb < dm.nblk; ++qb) {
        const int64_t i0 = qb * kBlock, j0 = kb * kBlock;
        const PairOperands op{Qt + i0, dOt + i0, Tp, Qc + i0 * HS, HS, dOc + i0 * HS, HS, Kc + j0 * HS, HS};
        backward_pair(a, dm, b, h, kb, qb, op, ps, true, true);
      }
  }
}

// Two-pass schedule, pass 1: dK, dV of key block kb of kv head kvh (query heads, then query blocks,
// in increasing order: the same order as the fused schedule).
void backward_kv_task(AlignedScratch& scratch, const BackwardArgs& a, const Dims& dm, int64_t b, int64_t kvh,
                      int64_t kb) {
  scratch.reserve(2 * AlignedScratch::round16(dm.HS * kBlock) + 2 * kBlock * kBlock);
  float* Qt = scratch.take(dm.HS * kBlock);
  float* dOt = scratch.take(dm.HS * kBlock);
  PairScratch ps{scratch.take(kBlock * kBlock), scratch.take(kBlock * kBlock)};
  for (int64_t h = kvh * dm.group; h < (kvh + 1) * dm.group; ++h)
    for (int64_t qb = kb; qb < dm.nblk; ++qb) {
      const int64_t i0 = qb * kBlock, nq = dm.rows_in(qb);
      transpose_block(Qt, kBlock, a.qkv + (b * dm.T + i0) * dm.C3 + dm.q_col(h), dm.C3, nq, dm.HS, dm.scale);
      transpose_block(dOt, kBlock, a.dout + (b * dm.T + i0) * dm.CO + dm.q_col(h), dm.CO, nq, dm.HS, 1.0f);
      backward_pair(a, dm, b, h, kb, qb, in_place_operands(a, dm, b, h, kb, qb, Qt, dOt), ps, true, false);
    }
}

// Two-pass schedule, pass 2: dQ of query block qb of head h, key blocks in increasing order.
void backward_q_task(AlignedScratch& scratch, const BackwardArgs& a, const Dims& dm, int64_t b, int64_t h,
                     int64_t qb) {
  scratch.reserve(2 * AlignedScratch::round16(dm.HS * kBlock) + 2 * kBlock * kBlock);
  float* Qt = scratch.take(dm.HS * kBlock);
  float* dOt = scratch.take(dm.HS * kBlock);
  PairScratch ps{scratch.take(kBlock * kBlock), scratch.take(kBlock * kBlock)};
  const int64_t i0 = qb * kBlock, nq = dm.rows_in(qb);
  transpose_block(Qt, kBlock, a.qkv + (b * dm.T + i0) * dm.C3 + dm.q_col(h), dm.C3, nq, dm.HS, dm.scale);
  transpose_block(dOt, kBlock, a.dout + (b * dm.T + i0) * dm.CO + dm.q_col(h), dm.CO, nq, dm.HS, 1.0f);
  for (int64_t kb = 0; kb <= qb; ++kb)
    backward_pair(a, dm, b, h, kb, qb, in_place_operands(a, dm, b, h, kb, qb, Qt, dOt), ps, false, true);
}

// Fused does 5 block matmuls per block pair, two-pass 7 plus strided operands: measured at T = 1024,
// HS = 64 on one core, two-pass takes ~1.55x the time. So fused wins unless its B*NKV equal tasks
// leave more than a third of the thread-slots idle.
bool prefer_fused(int64_t tasks, int64_t threads) {
  if (threads <= 1) return true;
  const int64_t rounds = (tasks + threads - 1) / threads;
  return 3 * tasks >= 2 * rounds * threads;
}

}  // namespace

void attention_forward(CpuWorkspace& ws, float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t NH,
                       int64_t NKV, int64_t HS) {
  if (B <= 0 || T <= 0) return;
  const Dims dm(B, T, NH, NKV, HS);
  const int64_t tasks = B * NH * dm.nblk;
  AlignedScratch* scratch = ws.thread_scratch(omp_get_max_threads());
  // Longest tasks (last query blocks) first so that the dynamic schedule ends balanced.
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t qb = dm.nblk - 1 - t / (B * NH);
    const int64_t bh = t % (B * NH);
    forward_block(scratch[omp_get_thread_num()], out, lse, qkv, dm, bh / NH, bh % NH, qb);
  }
}

namespace attn {

void attention_backward_scheduled(CpuWorkspace& ws, float* dqkv, const float* dout, const float* qkv,
                                  const float* out, const float* lse, int64_t B, int64_t T, int64_t NH, int64_t NKV,
                                  int64_t HS, BackwardSchedule schedule) {
  if (B <= 0 || T <= 0) return;
  const Dims dm(B, T, NH, NKV, HS);

  // D = rowsum(dout * out) per (b, h, t), in the workspace's reusable buffer.
  float* Dp = grown(ws.attention_D, static_cast<size_t>(B * NH * T));
  AlignedScratch* scratch = ws.thread_scratch(omp_get_max_threads());
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const int64_t b = bt / T, t = bt % T;
    for (int64_t h = 0; h < NH; ++h) {
      const float* o = out + bt * dm.CO + h * HS;
      const float* g = dout + bt * dm.CO + h * HS;
      float s = 0.0f;
      for (int64_t d = 0; d < HS; ++d) s += o[d] * g[d];
      Dp[(b * NH + h) * T + t] = s;
    }
  }

  const BackwardArgs a{dqkv, dout, qkv, lse, Dp};
  if (schedule == BackwardSchedule::automatic)
    schedule = prefer_fused(B * NKV, omp_get_max_threads()) ? BackwardSchedule::fused : BackwardSchedule::two_pass;
  if (schedule == BackwardSchedule::fused) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t t = 0; t < B * NKV; ++t) backward_fused_task(scratch[omp_get_thread_num()], a, dm, t / NKV, t % NKV);
    return;
  }
  const int64_t nblk = dm.nblk;
  // Pass 1: key block kb meets nblk - kb query blocks; ascending kb puts the longest tasks first.
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t t = 0; t < B * NKV * nblk; ++t) {
    const int64_t bk = t % (B * NKV);
    backward_kv_task(scratch[omp_get_thread_num()], a, dm, bk / NKV, bk % NKV, t / (B * NKV));
  }
  // Pass 2: query block qb meets qb + 1 key blocks; descending qb first.
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t t = 0; t < B * NH * nblk; ++t) {
    const int64_t bh = t % (B * NH);
    backward_q_task(scratch[omp_get_thread_num()], a, dm, bh / NH, bh % NH, nblk - 1 - t / (B * NH));
  }
}

}  // namespace attn

void attention_backward(CpuWorkspace& ws, float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS) {
  attn::attention_backward_scheduled(ws, dqkv, dout, qkv, out, lse, B, T, NH, NKV, HS,
                                     attn::BackwardSchedule::automatic);
}

}  // namespace tessera::ops::TESSERA_KERNEL_NS

#include "backend/cpu/kernel_isa_end.h"
