#include "core/heap_policy.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

namespace tessera {
namespace {

const char* no_environment(const char*) { return nullptr; }
const char* tunables_set_malloc(const char* name) {
  return std::string_view(name) == "GLIBC_TUNABLES" ? "glibc.pthread.rseq=0:glibc.malloc.trim_threshold=0" : nullptr;
}
const char* tunables_without_malloc(const char* name) {
  return std::string_view(name) == "GLIBC_TUNABLES" ? "glibc.pthread.rseq=0" : nullptr;
}
const char* trim_threshold_set(const char* name) {
  return std::string_view(name) == "MALLOC_TRIM_THRESHOLD_" ? "0" : nullptr;
}

// A step's temporary buffer (8 MiB, as an MPI collective's) comes from the heap, and once freed
// stays there for the next step instead of going back to the kernel.
TEST(HeapPolicy, AStepsFreedBufferStaysInTheHeap) {
  ASSERT_TRUE(keep_freed_heap_for_reuse(no_environment).applied);
  const size_t bytes = size_t{8} << 20;
  const struct mallinfo2 before = mallinfo2();
  void* p = std::malloc(bytes);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, bytes);
  const struct mallinfo2 allocated = mallinfo2();
  EXPECT_EQ(allocated.hblkhd, before.hblkhd) << "an 8 MiB block was mapped apart from the heap";
  std::free(p);
  const struct mallinfo2 freed = mallinfo2();
  EXPECT_EQ(freed.arena, allocated.arena) << "freeing the block shrank the heap (its pages went back)";
  EXPECT_GE(freed.fordblks, bytes);
}

TEST(HeapPolicy, LeavesMallocAloneWhenTheUserConfiguredIt) {
  const HeapPolicyOutcome tunables = keep_freed_heap_for_reuse(tunables_set_malloc);
  EXPECT_FALSE(tunables.applied);
  EXPECT_NE(tunables.why_not.find("GLIBC_TUNABLES"), std::string::npos) << tunables.why_not;
  const HeapPolicyOutcome trim = keep_freed_heap_for_reuse(trim_threshold_set);
  EXPECT_FALSE(trim.applied);
  EXPECT_NE(trim.why_not.find("MALLOC_TRIM_THRESHOLD_"), std::string::npos) << trim.why_not;
  EXPECT_TRUE(keep_freed_heap_for_reuse(tunables_without_malloc).applied) << "other glibc tunables are not malloc's";
}

}  // namespace
}  // namespace tessera
