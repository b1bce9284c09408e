// mallopt settings for the trainer's heap (see heap_policy.h).
#include "core/heap_policy.h"

#include <malloc.h>

#include <cstdlib>
#include <string_view>

namespace tessera {

HeapPolicyOutcome keep_freed_heap_for_reuse(const char* (*environment)(const char* name)) {
  const char* tunables = environment("GLIBC_TUNABLES");
  if (tunables && std::string_view(tunables).find("glibc.malloc.") != std::string_view::npos)
    return {false, "GLIBC_TUNABLES sets malloc's own options"};
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"})
    if (environment(name)) return {false, std::string(name) + " is set"};
  // Fixing the threshold also stops glibc adapting it; the trim threshold must then be set as well,
  // or it stays at 128 KiB and every free at the heap's top hands the pages back anyway.
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHeapServeBytes)) != 1) return {false, "mallopt(M_MMAP_THRESHOLD) refused"};
  if (mallopt(M_TRIM_THRESHOLD, static_cast<int>(kHeapKeepBytes)) != 1) return {false, "mallopt(M_TRIM_THRESHOLD) refused"};
  return {true, ""};
}

HeapPolicyOutcome keep_freed_heap_for_reuse() {
  return keep_freed_heap_for_reuse([](const char* name) -> const char* { return std::getenv(name); });
}

}  // namespace tessera
