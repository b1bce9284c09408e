// Split reduction of a tied embedding's gradient: the head's part early, the embedding's rows sparse.
#include "parallel/tied_embedding_tail.h"

#include <cstring>

namespace tessera {

std::unique_ptr<TiedEmbeddingTail> TiedEmbeddingTail::create(Communicator& dp, ParamStore& store) {
  const ParamLayout& layout = store.layout();
  const ParamInfo* wte = layout.find("wte");
  const ParamInfo* lnf = layout.find("lnf.w");
  if (dp.size() == 1 || !wte || wte->layer != -1 || !lnf || layout.find("lm_head.w")) return nullptr;
  return std::unique_ptr<TiedEmbeddingTail>(new TiedEmbeddingTail(dp, store, *wte, lnf->layer));
}

TiedEmbeddingTail::TiedEmbeddingTail(Communicator& dp, ParamStore& store, const ParamInfo& wte, int head_layer)
    : dp_(dp), store_(store), offset_(wte.offset), rows_(wte.shape[0]), cols_(wte.shape[1]),
      end_(wte.offset + (wte.numel + 15) / 16 * 16), head_layer_(head_layer),
      head_(static_cast<size_t>(wte.numel) * sizeof(float), MemCategory::communication),
      mask_(static_cast<size_t>(wte.shape[0])) {}

void TiedEmbeddingTail::on_head_ready() {
  float* g = store_.grads() + offset_;
  const size_t bytes = static_cast<size_t>(rows_ * cols_) * sizeof(float);
  std::memcpy(head_.data(), g, bytes);
  std::memset(g, 0, bytes);
  head_work_ = dp_.all_reduce_async(head_.as<float>(), head_.as<float>(), rows_ * cols_, DType::f32, ReduceOp::avg);
  head_started_ = true;
}

Status TiedEmbeddingTail::finish() {
  float* g = store_.grads() + offset_;
  if (!head_started_) {  // no sync micro-batch reached the head: reduce dwte whole
    last_rows_ = rows_;
    return dp_.all_reduce_async(g, g, rows_ * cols_, DType::f32, ReduceOp::avg).wait();
  }
  head_started_ = false;
  for (int64_t r = 0; r < rows_; ++r) {
    const float* row = g + r * cols_;
    int32_t touched = 0;
    for (int64_t c = 0; c < cols_ && !touched; ++c) touched = row[c] != 0.f;
    mask_[static_cast<size_t>(r)] = touched;
  }
  TS_RETURN_IF_ERROR(dp_.all_reduce_async(mask_.data(), mask_.data(), rows_, DType::i32, ReduceOp::max).wait());
  union_.clear();
  for (int64_t r = 0; r < rows_; ++r)
    if (mask_[static_cast<size_t>(r)]) union_.push_back(r);
  // Pack the union's rows to the front (in order, so a row never overwrites one not yet moved).
  for (size_t k = 0; k < union_.size(); ++k)
    if (static_cast<int64_t>(k) != union_[k])
      std::memcpy(g + static_cast<int64_t>(k) * cols_, g + union_[k] * cols_, static_cast<size_t>(cols_) * sizeof(float));
  const int64_t packed = static_cast<int64_t>(union_.size()) * cols_;
  TS_RETURN_IF_ERROR(dp_.all_reduce_async(g, g, packed, DType::f32, ReduceOp::avg).wait());
  TS_RETURN_IF_ERROR(head_work_.wait());
  float* h = head_.as<float>();
  for (size_t k = 0; k < union_.size(); ++k) {
    float* dst = h + union_[k] * cols_;
    const float* src = g + static_cast<int64_t>(k) * cols_;
    for (int64_t c = 0; c < cols_; ++c) dst[c] += src[c];
  }
  std::memcpy(g, h, static_cast<size_t>(rows_ * cols_) * sizeof(float));
  last_rows_ = static_cast<int64_t>(union_.size());
  return Status::ok_status();
}

}  // namespace tessera
