// ExpertParallel: the mixture-of-experts dispatch and combine exchanges, timed out like every
// communication of the step.
#include "parallel/expert_parallel.h"

#include <string>
#include <vector>

#include "comm/collective_log.h"  // steady_seconds

namespace tessera {

Status validate_expert_parallel(int ep, int64_t moe_experts) {
  if (ep < 1) return invalid_argument("parallel.ep is " + std::to_string(ep) + ": it must be >= 1 (1 = off)");
  if (ep == 1) return Status();
  if (moe_experts == 0)
    return invalid_argument("parallel.ep = " + std::to_string(ep) +
                            " spreads a mixture-of-experts model's experts over ranks, but the model is dense "
                            "(model.moe_experts = 0): use a MoE model (e.g. model.preset = \"tiny-moe\"), or "
                            "parallel.dp instead of parallel.ep");
  if (moe_experts % ep != 0)
    return invalid_argument("parallel.ep = " + std::to_string(ep) + " does not divide model.moe_experts = " +
                            std::to_string(moe_experts) + ": every ep rank computes moe_experts / ep experts; pick an "
                            "ep that divides " + std::to_string(moe_experts));
  return Status();
}

void ExpertParallel::record(const Status& s, const char* what) {
  if (!s.ok() && status_.ok()) status_ = Status(s.code(), std::string("expert parallel ") + what + ": " + s.message());
}

void ExpertParallel::exchange_counts(const int32_t* send, int32_t* recv, int64_t n) {
  if (!status_.ok()) return;  // the group is already broken
  const double t0 = steady_seconds();
  record(comm_.all_to_all(send, recv, n, DType::i32), "all-to-all of the experts' row counts");
  stats_.seconds += steady_seconds() - t0;
}

void ExpertParallel::start_rows(const float* send, const int64_t* send_rows, float* recv, const int64_t* recv_rows,
                                int64_t width) {
  if (!status_.ok()) return;
  const int p = comm_.size(), me = comm_.rank();
  send_counts_.assign(static_cast<size_t>(p), 0);
  recv_counts_.assign(static_cast<size_t>(p), 0);
  for (int r = 0; r < p; ++r) {
    send_counts_[static_cast<size_t>(r)] = send_rows[r] * width;
    recv_counts_[static_cast<size_t>(r)] = recv_rows[r] * width;
    const int64_t bytes = send_rows[r] * width * static_cast<int64_t>(sizeof(float));
    (r == me ? stats_.bytes_kept : stats_.bytes_sent) += bytes;
  }
  ++stats_.exchanges;
  const double t0 = steady_seconds();
  rows_ = comm_.all_to_allv_async(send, send_counts_.data(), recv, recv_counts_.data(), DType::f32);
  stats_.seconds += steady_seconds() - t0;
}

void ExpertParallel::progress_rows() {
  const double t0 = steady_seconds();
  (void)rows_.test();
  stats_.seconds += steady_seconds() - t0;
}

void ExpertParallel::finish_rows() {
  const double t0 = steady_seconds();
  record(rows_.wait(), "all-to-all of the dispatched rows");
  stats_.seconds += steady_seconds() - t0;
}

}  // namespace tessera
