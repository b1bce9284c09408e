// Split reduction of a tied embedding's gradient: the head's part early, the embedding's rows sparse.
#include "parallel/tied_embedding_tail.h"

namespace tessera {

const ParamInfo* tied_embedding_tail_wte(const ParamLayout& layout, int replicas) {
  const ParamInfo* wte = layout.find("wte");
  if (replicas == 1 || !wte || wte->layer != -1 || !layout.find("lnf.w") || layout.find("lm_head.w")) return nullptr;
  return wte;
}

std::unique_ptr<TiedEmbeddingTail> TiedEmbeddingTail::create(Backend& backend, Communicator& dp, ParamStore& store,
                                                             ReduceOp op) {
  const ParamInfo* wte = tied_embedding_tail_wte(store.layout(), dp.size());
  if (!wte) return nullptr;
  const int head_layer = store.layout().find("lnf.w")->layer;
  return std::unique_ptr<TiedEmbeddingTail>(new TiedEmbeddingTail(backend, dp, store, *wte, head_layer, op));
}

TiedEmbeddingTail::TiedEmbeddingTail(Backend& backend, Communicator& dp, ParamStore& store, const ParamInfo& wte,
                                     int head_layer, ReduceOp op)
    : backend_(backend), dp_(dp), store_(store), op_(op), offset_(wte.offset), rows_(wte.shape[0]), cols_(wte.shape[1]),
      end_(wte.offset + (wte.numel + 15) / 16 * 16), head_layer_(head_layer),
      head_(backend.allocate(static_cast<size_t>(wte.numel) * sizeof(float), MemCategory::communication)),
      mask_(static_cast<size_t>(wte.shape[0])) {}

void TiedEmbeddingTail::on_head_ready() {
  float* g = store_.grads() + offset_;
  backend_.copy(head_.as<float>(), g, rows_ * cols_);
  backend_.fill(g, rows_ * cols_, 0.0f);
  head_work_ = dp_.all_reduce_async(head_.as<float>(), head_.as<float>(), rows_ * cols_, DType::f32, op_);
  head_started_ = true;
}

Status TiedEmbeddingTail::finish() {
  float* g = store_.grads() + offset_;
  if (!head_started_) {  // no sync micro-batch reached the head: reduce dwte whole
    last_rows_ = rows_;
    return dp_.all_reduce_async(g, g, rows_ * cols_, DType::f32, op_).wait();
  }
  head_started_ = false;
  backend_.nonzero_rows(mask_.data(), g, rows_, cols_);
  TS_RETURN_IF_ERROR(dp_.all_reduce_async(mask_.data(), mask_.data(), rows_, DType::i32, ReduceOp::max).wait());
  union_.clear();
  for (int64_t r = 0; r < rows_; ++r)
    if (mask_[static_cast<size_t>(r)]) union_.push_back(r);
  const int64_t touched = static_cast<int64_t>(union_.size());
  backend_.gather_rows(g, g, union_.data(), touched, cols_);  // the union's rows packed to the front
  const int64_t packed = touched * cols_;
  TS_RETURN_IF_ERROR(dp_.all_reduce_async(g, g, packed, DType::f32, op_).wait());
  TS_RETURN_IF_ERROR(head_work_.wait());
  float* h = head_.as<float>();
  backend_.scatter_add_rows(h, union_.data(), g, touched, cols_);
  backend_.copy(g, h, rows_ * cols_);
  last_rows_ = touched;
  return Status::ok_status();
}

}  // namespace tessera
