// The two race-free parallel schedules of attention_backward, exposed so that tests can run both
// (through CpuKernels::attention_backward_scheduled). They perform the same per-block arithmetic in
// the same order, so their results are bitwise equal.
#pragma once

namespace tessera::ops::attn {

enum class BackwardSchedule {
  automatic,  // fused when the (b, kv head) tasks keep the threads busy, else two_pass
  fused,      // one task per (b, kv head) computes dQ, dK, dV of its whole group: least work
  two_pass,   // dK,dV per (b, kv head, key block), then dQ per (b, head, query block): most parallelism
};

}  // namespace tessera::ops::attn
