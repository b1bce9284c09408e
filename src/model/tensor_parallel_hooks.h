// The tensor-parallel seam of the transformer: Megatron's conjugate pairs (mappings.py) as hooks
// the model calls around its projections, embedding and loss. model/ holds only the identity.
//
// Notation: X (rows, C) activations, rows = B*T tokens; p = tp_size(), r = tp_rank(); weights are
// written as in the math (Y = XA), i.e. A = W^T for Tessera's (out, in) weights.
//
// Column-parallel linear, Y = XA, A = [A_1 ... A_p]: rank r holds A_r (rows of W: heads of
//   q|k|v, or its slice of gate|up / fc) and computes Y_r = X A_r, no communication. Its input
//   passes copy_to_region: forward f(X) = X; backward dX = sum_r dX_r (all-reduce), since every
//   rank's Y_r depends on the same X.
// Row-parallel linear, Y = XA, A = [A_1; ...; A_p], X = [X_1 ... X_p]: rank r holds A_r (columns
//   of W) and the X_r its column-parallel partner produced, computes Y_r = X_r A_r, and
//   reduce_from_region gives Y = sum_r Y_r (forward all-reduce; backward identity). Its bias is
//   replicated and must be added once, after the reduction.
// Attention (per head) and the element-wise activation between a column- and a row-parallel
//   linear need no communication: rank r owns heads [r*NH/p, (r+1)*NH/p) and KV heads alike.
// Vocabulary-parallel embedding, E = [E_1; ...; E_p] by vocabulary rows (V padded to a multiple
//   of p): rank r looks up only the tokens in its range (zero rows elsewhere), then
//   reduce_from_region (point embedding) sums the partial lookups; backward identity.
// Vocabulary-parallel head, logits = X H^T with H = [H_1; ...; H_p]: column-parallel, so its input
//   passes copy_to_region (point lm_head); rank r holds logits Z_r (rows, V/p), never gathered.
// Vocabulary-parallel cross-entropy over Z = [Z_1 ... Z_p]: m = max_r(rowmax Z_r) (all-reduce MAX,
//   cross_entropy_max), then [sum_j exp(Z_r - m), z_target or 0] summed over ranks (all-reduce SUM,
//   cross_entropy_sum); loss = log(sum) + m - z_target and dZ_r = softmax_r - onehot_r locally.
//   Padded vocabulary columns (>= the true V) must be left out of the sums.
// Sequence parallelism (Megatron-LM, Korthikanti et al. 2022; on when sequence_parallel() and p > 1)
//   splits the rows outside the linears: rank r owns rows [r*rows/p, (r+1)*rows/p) of the layer
//   norms, residual adds, the embedding output and the final norm, and computes and stores only
//   those. The conjugate pairs then move rows instead of summing whole buffers:
//     copy_to_region:     forward all-gather of the norm output's row shards; backward
//                         reduce-scatter of dX (rank r keeps the sum of its rows).
//     reduce_from_region: forward reduce-scatter of the partial sums Y_r (rank r keeps its rows);
//                         backward all-gather of dY's row shards.
//   Every hook still gets the whole (rows, cols) buffer: on entry to a gather only rank r's rows are
//   valid, on return from a scatter only they are; both run in place. sequence_gather() is a plain
//   all-gather for the places outside the pairs (the Transformer's header lists them). rows must be
//   divisible by p (validate_sequence_parallel). Replicated parameters then get partial gradients
//   on each rank (norm weights: over its rows; row-parallel biases and wpe: on rank 0 only, which
//   alone adds them); their sum over the tp group is the whole gradient
//   (parallel/tensor_parallel.h: sequence_parallel_reduce_replicated_grads).
//   The vocabulary-parallel head and loss still see all rows (copy_to_region at lm_head gathers).
//
// The Transformer runs the sharded math when its ParamLayout is a tp shard (local head, ffn and
// vocabulary sizes, ops::embedding_forward_range, the split ops::crossentropy_* ops); at tp size 1
// it keeps the fused ops::softmax_crossentropy and the two cross_entropy_* hooks get data == nullptr.
// The communicating implementation is parallel/tensor_parallel.h (TensorParallel).
//
// Errors: hooks return nothing, so a forward/backward reads top to bottom. An implementation that
// can fail records its first failure, skips its later communication and reports it in status();
// the caller checks status() (or Transformer::tp_status()) after each forward and backward.
#pragma once
#include <cstdint>

#include "core/status.h"

namespace tessera {

// Where a hook is called. embedding and lm_head/loss points carry layer -1 and n_layer.
// stage_input / stage_output (sequence parallelism only): a pipeline stage's whole input gradient and
// output, gathered from the row shards (layer: the stage's first / last block).
enum class TpPoint : uint8_t {
  embedding, attn_qkv, attn_proj, mlp_fc, mlp_proj, lm_head, loss, stage_input, stage_output
};

// One activation or gradient buffer at a hook point, reduced (or gathered) in place.
struct TpRegion {
  TpPoint point;
  int layer;      // -1: embedding; n_layer: final norm, head and loss; else the block index
  float* data;    // (rows, cols), row-major
  int64_t rows;   // tokens B*T (all of them, also under sequence parallelism): the dimension it splits
  int64_t cols;   // row width (C for the linears' inputs/outputs; 1 or 2 for the loss statistics)
};

class TensorParallelHooks {
 public:
  virtual ~TensorParallelHooks() = default;
  virtual int tp_rank() const = 0;
  virtual int tp_size() const = 0;

  // Whether the model runs sequence-parallel (see above): the pairs below then all-gather and
  // reduce-scatter rows. Read once by Transformer::set_tensor_parallel_hooks; ignored at tp size 1.
  virtual bool sequence_parallel() const { return false; }

  // Input X of a column-parallel linear (attn_qkv, mlp_fc, lm_head): forward identity
  // (sequence parallel: all-gather rows).
  virtual void copy_to_region_forward(const TpRegion& x) = 0;
  // dX of that linear, after its backward: all-reduce (sum over tp) (sequence parallel: reduce-scatter).
  virtual void copy_to_region_backward(const TpRegion& dx) = 0;
  // Output Y of a row-parallel linear (attn_proj, mlp_proj) or the embedding: all-reduce (sum)
  // (sequence parallel: reduce-scatter).
  virtual void reduce_from_region_forward(const TpRegion& y) = 0;
  // dY of that op, before its backward: identity (sequence parallel: all-gather rows).
  virtual void reduce_from_region_backward(const TpRegion& dy) = 0;
  // Sequence parallelism only: all-gather rows in place (rank r's rows valid on entry, all on return).
  // The default, the identity, is right only for a world of one: sequence-parallel hooks override it.
  virtual void sequence_gather(const TpRegion&) {}
  // Vocabulary-parallel loss: per-row maxima (rows, 1), all-reduce MAX.
  virtual void cross_entropy_max(const TpRegion& row_max) = 0;
  // Per-row [sum-exp, target logit] (rows, 2), all-reduce SUM.
  virtual void cross_entropy_sum(const TpRegion& row_sums) = 0;
  // The first communication failure of any hook since construction (ok when none).
  virtual Status status() const { return Status::ok_status(); }
};

// A world of one: every hook is the identity. The Transformer's default.
class IdentityTensorParallelHooks final : public TensorParallelHooks {
 public:
  int tp_rank() const override { return 0; }
  int tp_size() const override { return 1; }
  void copy_to_region_forward(const TpRegion&) override {}
  void copy_to_region_backward(const TpRegion&) override {}
  void reduce_from_region_forward(const TpRegion&) override {}
  void reduce_from_region_backward(const TpRegion&) override {}
  void cross_entropy_max(const TpRegion&) override {}
  void cross_entropy_sum(const TpRegion&) override {}
};

const char* tp_point_name(TpPoint p);

// Whether `rows` = micro_batch * seq_len token rows split evenly over a tensor-parallel group of
// `tp` under sequence parallelism; the error names both and how to fix them. Check it with the run
// config, before launch; Transformer::set_tensor_parallel_hooks TS_CHECKs it.
Status validate_sequence_parallel(int64_t rows, int tp);

}  // namespace tessera
