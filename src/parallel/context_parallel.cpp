// ContextParallel: the Ulysses all-to-alls and the ring's sends and receives, timed out like every
// communication of the step.
#include "parallel/context_parallel.h"

#include <string>

#include "comm/collective_log.h"  // steady_seconds

namespace tessera {

Result<ContextParallelMode> parse_context_parallel_mode(const std::string& name) {
  if (name == "ulysses") return ContextParallelMode::ulysses;
  if (name == "ring") return ContextParallelMode::ring;
  return invalid_argument("parallel.cp_mode = \"" + name + "\" is not a context-parallel mode: use \"ulysses\" or \"ring\"");
}

Status validate_context_parallel(int cp, ContextParallelMode mode, int64_t seq_len, int64_t n_head, int64_t n_kv_head,
                                 int tp) {
  if (cp < 1) return invalid_argument("parallel.cp is " + std::to_string(cp) + ": it must be >= 1 (1 = off)");
  if (cp == 1) return Status();
  if (mode == ContextParallelMode::ring) {
    if (seq_len % (2 * cp) == 0) return Status();
    return invalid_argument("parallel.cp = " + std::to_string(cp) + " (cp_mode \"ring\") gives each rank two pieces of " +
                            "every sequence, so 2 x cp = " + std::to_string(2 * cp) + " must divide data.seq_len = " +
                            std::to_string(seq_len) + "; pick a seq_len that is a multiple of " + std::to_string(2 * cp) +
                            " or another cp");
  }
  if (seq_len % cp != 0)
    return invalid_argument("parallel.cp = " + std::to_string(cp) + " does not divide data.seq_len = " +
                            std::to_string(seq_len) + ": each rank holds seq_len / cp positions; pick a cp that divides it");
  const int64_t heads = n_head / tp, kv = n_kv_head / tp;
  if (heads % cp != 0 || kv % cp != 0)
    return invalid_argument("parallel.cp = " + std::to_string(cp) + " (cp_mode \"ulysses\") splits the attention heads: " +
                            "the " + std::to_string(heads) + " heads and " + std::to_string(kv) +
                            " KV heads per tensor-parallel rank must both be divisible by it; use a cp that divides " +
                            std::to_string(kv) + ", fewer tp ranks, or parallel.cp_mode = \"ring\" (no limit from the heads)");
  return Status();
}

void ContextParallel::record(const Status& s, const char* what) {
  if (!s.ok() && status_.ok()) status_ = Status(s.code(), std::string("context parallel ") + what + ": " + s.message());
}

void ContextParallel::all_to_all(const float* send, float* recv, int64_t block) {
  if (comm_.size() == 1 || !status_.ok()) return;  // a world of one; or the group is already broken
  const double t0 = steady_seconds();
  record(comm_.all_to_all_async(send, recv, block, DType::f32).wait(), "all-to-all around attention");
  collective_s_ += steady_seconds() - t0;
}

void ContextParallel::ring_start(int channel, const float* send, float* recv, int64_t count) {
  if (comm_.size() == 1 || !status_.ok()) return;
  const int p = comm_.size(), r = comm_.rank();
  RingExchange& x = ring_.at(static_cast<size_t>(channel));
  // Receive first: the matching send of the previous rank may already be on its way.
  x.recv = comm_.recv_async(recv, count, DType::f32, (r + p - 1) % p, channel);
  x.send = comm_.send_async(send, count, DType::f32, (r + 1) % p, channel);
  ++ring_stats_.exchanges;
  ring_stats_.floats += count;
}

void ContextParallel::ring_wait(int channel) {
  RingExchange& x = ring_.at(static_cast<size_t>(channel));
  const double t0 = steady_seconds();
  record(x.recv.wait(), "ring receive of keys and values");
  record(x.send.wait(), "ring send of keys and values");
  ring_stats_.wait_s += steady_seconds() - t0;
  x = RingExchange{};
}

void ContextParallel::all_reduce_sum(int32_t* x, int64_t n) {
  if (comm_.size() == 1 || !status_.ok()) return;
  const double t0 = steady_seconds();
  record(comm_.all_reduce(x, x, n, DType::i32), "all-reduce of the experts' routed counts");
  collective_s_ += steady_seconds() - t0;
}

void ContextParallel::ring_progress() {
  const double t0 = steady_seconds();
  for (RingExchange& x : ring_) {
    (void)x.recv.test();  // a failure stays in the Work: ring_wait reports it
    (void)x.send.test();
  }
  ring_stats_.progress_s += steady_seconds() - t0;
}

}  // namespace tessera
