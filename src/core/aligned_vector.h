// std::vector storage on 64-byte (cache line) boundaries, outside Tessera's memory accounting: for
// measurements and benchmarks that stream arrays the way the trainer's Buffers lay them out, without
// their bytes counting toward a run's memory peaks. (A plain vector's 16-byte alignment splits a cache
// line on every other AVX-512 load: AdamW over 16 Mi parameters streamed 28 GB/s against 39 aligned,
// on a Zen 4.)
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace tessera {

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlignment{64};
  CacheLineAllocator() = default;
  template <class U>
  explicit CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlignment)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlignment); }
  bool operator==(const CacheLineAllocator&) const { return true; }
};

using AlignedFloats = std::vector<float, CacheLineAllocator<float>>;

}  // namespace tessera
