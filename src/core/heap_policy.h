// The C library heap's policy for a long-running trainer. glibc hands a freed block of 128 KiB or
// more (up to its adaptive threshold) straight back to the kernel, and the next allocation of the
// same size faults every page in again, zero-filled. MPI's non-blocking collectives allocate their
// temporary buffers per call, so a data-parallel step paid ~3,500 page faults per rank (bench-small
// dp 2: 130 K faults against 80 K over 20 steps, about 6 % of the step on a 2-core VM;
// docs/performance.md "Communication and data parallelism").
#pragma once
#include <string>

namespace tessera {

// What keep_freed_heap_for_reuse did: applied, or why not (the user configured malloc themselves).
struct HeapPolicyOutcome {
  bool applied = false;
  std::string why_not;
};

// Serves blocks up to 32 MiB (glibc's ceiling for the setting) from the heap and keeps up to
// kHeapKeepBytes of free memory at its top instead of trimming it, so buffers freed and allocated
// again every step reuse resident pages. Leaves malloc alone when the environment configures it
// (GLIBC_TUNABLES naming glibc.malloc, or MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_): a user's
// choice wins. `environment` is looked up by name (getenv in production, a map in tests).
constexpr long kHeapServeBytes = 32L << 20;
constexpr long kHeapKeepBytes = 64L << 20;
HeapPolicyOutcome keep_freed_heap_for_reuse(const char* (*environment)(const char* name));
HeapPolicyOutcome keep_freed_heap_for_reuse();

}  // namespace tessera
