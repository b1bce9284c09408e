// ContextParallel: the Ulysses all-to-alls, timed out like every collective of the step.
#include "parallel/context_parallel.h"

#include <string>

namespace tessera {

Status validate_context_parallel(int cp, int64_t seq_len, int64_t n_head, int64_t n_kv_head, int tp) {
  if (cp < 1) return invalid_argument("parallel.cp is " + std::to_string(cp) + ": it must be >= 1 (1 = off)");
  if (cp == 1) return Status();
  if (seq_len % cp != 0)
    return invalid_argument("parallel.cp = " + std::to_string(cp) + " does not divide data.seq_len = " +
                            std::to_string(seq_len) + ": each rank holds seq_len / cp positions; pick a cp that divides it");
  const int64_t heads = n_head / tp, kv = n_kv_head / tp;
  if (heads % cp != 0 || kv % cp != 0)
    return invalid_argument("parallel.cp = " + std::to_string(cp) + " (cp_mode \"ulysses\") splits the attention heads: " +
                            "the " + std::to_string(heads) + " heads and " + std::to_string(kv) +
                            " KV heads per tensor-parallel rank must both be divisible by it; use a cp that divides " +
                            std::to_string(kv) + ", or fewer tp ranks");
  return Status();
}

void ContextParallel::all_to_all(const float* send, float* recv, int64_t block) {
  if (comm_.size() == 1 || !status_.ok()) return;  // a world of one; or the group is already broken
  const Status s = comm_.all_to_all_async(send, recv, block, DType::f32).wait();
  if (!s.ok()) status_ = Status(s.code(), "context parallel all-to-all around attention: " + s.message());
}

}  // namespace tessera
