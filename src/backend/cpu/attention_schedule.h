// The two race-free parallel schedules of attention_backward, exposed so that tests can run both.
// They perform the same per-block arithmetic in the same order, so their results are bitwise equal.
#pragma once
#include <cstdint>

namespace tessera::ops::attn {

enum class BackwardSchedule {
  automatic,  // fused when the (b, kv head) tasks keep the threads busy, else two_pass
  fused,      // one task per (b, kv head) computes dQ, dK, dV of its whole group: least work
  two_pass,   // dK,dV per (b, kv head, key block), then dQ per (b, head, query block): most parallelism
};

void attention_backward_scheduled(float* dqkv, const float* dout, const float* qkv, const float* out,
                                  const float* lse, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS,
                                  BackwardSchedule schedule);

}  // namespace tessera::ops::attn
