// The tied embedding's gradient without the exposed tail. With tied embeddings, dwte collects the
// head's gradient at the start of the backward pass and the embedding's at its very end, so under
// plain data parallelism its all-reduce (V x C, often the largest tensor) can only start when the
// backward is over and is left exposed. Split it:
//   head ready (sync micro-batch): dwte so far (the head's part, plus earlier micro-batches') moves
//     to a side buffer H, dwte is zeroed, and H's all-reduce starts -- hidden behind the rest of
//     the backward pass;
//   end of backward: dwte now holds only the last micro-batch's embedding gradient, non-zero only in
//     the rows of tokens it saw. The ranks OR their non-zero-row masks (an all-reduce of V ints),
//     pack the union's rows to the front of dwte and all-reduce just those; then
//     dwte = H + the unpacked rows.
// Exact up to float rounding (avg(H) + avg(E) instead of avg(H + E), or the sums): rows outside the union are
// zero on every rank. Costs one V x C buffer.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "core/memory.h"
#include "model/param_layout.h"

namespace tessera {

// The tied embedding a chunk's data-parallel reduction splits off: wte, when `layout` holds it with
// the head that reads it (wte at layer -1, the final norm, no lm_head.w) and `replicas` > 1; else
// nullptr. What create() builds on, and what the planners charge for.
const ParamInfo* tied_embedding_tail_wte(const ParamLayout& layout, int replicas);

class TiedEmbeddingTail {
 public:
  // nullptr unless the store holds a tied head on the embedding's stage (wte at layer -1, the final
  // norm, no lm_head.w) and dp has more than one rank.
  // op: how the replicas' dwte combine (sum: the caller divides later, as DataParallel's grad_scale does).
  static std::unique_ptr<TiedEmbeddingTail> create(Backend& backend, Communicator& dp, ParamStore& store,
                                                   ReduceOp op = ReduceOp::avg);

  int head_layer() const { return head_layer_; }
  // First flat element after wte: the gradient buckets cover the rest of the buffer.
  int64_t end() const { return end_; }
  // The head's backward is done (on the micro-batch that communicates).
  void on_head_ready();
  // After the backward: reduce the embedding rows and combine. Falls back to one all-reduce of
  // dwte when on_head_ready did not run this step.
  Status finish();
  // Rows of dwte the last finish() reduced sparsely (for reports).
  int64_t last_rows() const { return last_rows_; }

 private:
  TiedEmbeddingTail(Backend& backend, Communicator& dp, ParamStore& store, const ParamInfo& wte, int head_layer,
                    ReduceOp op);
  Backend& backend_;
  Communicator& dp_;
  ParamStore& store_;
  ReduceOp op_;
  int64_t offset_, rows_, cols_, end_;
  int head_layer_;
  Buffer head_;                  // H: (rows, cols)
  std::vector<int32_t> mask_;    // rows touched on any rank
  std::vector<int64_t> union_;   // their indices
  Work head_work_;
  bool head_started_ = false;
  int64_t last_rows_ = 0;
};

}  // namespace tessera
