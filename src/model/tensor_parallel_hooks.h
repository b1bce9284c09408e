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
// Sequence parallelism (later) swaps the all-reduces for collectives along rows: copy_to_region
//   becomes all-gather (forward) / reduce-scatter (backward), reduce_from_region becomes
//   reduce-scatter / all-gather. Every hook therefore gets the whole buffer with its row count and
//   width; rank r's sequence shard is rows [r*rows/p, (r+1)*rows/p), so both can run in place.
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
enum class TpPoint : uint8_t { embedding, attn_qkv, attn_proj, mlp_fc, mlp_proj, lm_head, loss };

// One activation or gradient buffer at a hook point, reduced (or gathered) in place.
struct TpRegion {
  TpPoint point;
  int layer;      // -1: embedding; n_layer: final norm, head and loss; else the block index
  float* data;    // (rows, cols), row-major
  int64_t rows;   // tokens B*T: the dimension sequence parallelism splits
  int64_t cols;   // row width (C for the linears' inputs/outputs; 1 or 2 for the loss statistics)
};

class TensorParallelHooks {
 public:
  virtual ~TensorParallelHooks() = default;
  virtual int tp_rank() const = 0;
  virtual int tp_size() const = 0;

  // Input X of a column-parallel linear (attn_qkv, mlp_fc, lm_head): forward identity.
  virtual void copy_to_region_forward(const TpRegion& x) = 0;
  // dX of that linear, after its backward: all-reduce (sum over tp).
  virtual void copy_to_region_backward(const TpRegion& dx) = 0;
  // Output Y of a row-parallel linear (attn_proj, mlp_proj) or the embedding: all-reduce (sum).
  virtual void reduce_from_region_forward(const TpRegion& y) = 0;
  // dY of that op, before its backward: identity.
  virtual void reduce_from_region_backward(const TpRegion& dy) = 0;
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

}  // namespace tessera
