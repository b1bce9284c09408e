// Aligned host buffers whose bytes are counted per category (live and peak), so that a run can
// report where its memory goes. Buffers are allocated once at set-up; the training step allocates none.
#pragma once
#include <array>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <string_view>

namespace tessera {

enum class MemCategory { parameters, gradients, optimizer_state, activations, communication, other };
constexpr int kNumMemCategories = 6;
std::string_view mem_category_name(MemCategory c);

// Process-wide counters: memory is a process-wide resource, and the counters never steer computation.
struct MemoryStats {
  std::array<size_t, kNumMemCategories> live{};
  std::array<size_t, kNumMemCategories> peak{};
  size_t total_live = 0;
  size_t total_peak = 0;
};
MemoryStats memory_stats();
void reset_memory_peaks();

// One owner's counters (a backend's memory by category), kept besides the process-wide ones.
class MemoryCounters {
 public:
  void add(MemCategory c, long long delta);
  MemoryStats stats() const;

 private:
  mutable std::mutex mu_;
  MemoryStats stats_;
};

// How a buffer's memory is backed. resident: allocated and counted in full. paged: an anonymous
// mapping whose pages become resident when first touched and can be handed back to the OS
// (zero_range / discard_range), so a ZeRO rank's full-size parameter or gradient buffer only
// costs the pages it currently uses; its counted bytes are what sample_residency() last measured.
// (On a GPU the same design maps to virtual-memory reservations with physical pages mapped on demand.)
enum class Residency { resident, paged };

// Memory a backend allocates outside the host heap (a GPU's): the buffers it hands out give their
// bytes back, and zero ranges, through it.
class ExternalMemory {
 public:
  virtual ~ExternalMemory() = default;
  virtual void release(void* data, size_t bytes) = 0;
  virtual void zero(void* data, size_t bytes) = 0;
};

// Owning, 64-byte aligned (paged: page aligned), zero-initialised buffer.
class Buffer {
 public:
  Buffer() = default;
  // counters: also counted there (the backend that allocated it); it must outlive the buffer.
  Buffer(size_t bytes, MemCategory category, Residency residency = Residency::resident,
         MemoryCounters* counters = nullptr);
  // Takes `data` (bytes of `owner`'s memory, already zeroed): counted in `counters` only (not in the
  // process-wide host counters), given back through `owner`, which must outlive the buffer.
  Buffer(ExternalMemory& owner, void* data, size_t bytes, MemCategory category, MemoryCounters* counters);
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  template <typename T> T* as() { return static_cast<T*>(data_); }
  template <typename T> const T* as() const { return static_cast<const T*>(data_); }
  size_t bytes() const { return bytes_; }
  MemCategory category() const { return category_; }
  bool paged() const { return paged_; }

  // Sets bytes [offset, offset + n) to zero; on a paged buffer the whole pages inside are returned
  // to the OS (they read as zero and cost nothing until touched again).
  void zero_range(size_t offset, size_t n);
  // Paged buffers: returns the whole pages inside [offset, offset + n) to the OS (their contents
  // become zero); the partial pages at the edges keep their contents. No-op on a resident buffer.
  void discard_range(size_t offset, size_t n);
  // Bytes currently resident (paged: measured with mincore; resident: all of them). Updates the
  // category's live/peak counters to the measurement.
  size_t sample_residency();

 private:
  void release();
  void count(long long delta);
  void* data_ = nullptr;
  size_t bytes_ = 0;
  size_t mapped_ = 0;   // paged: length of the mapping
  size_t counted_ = 0;  // bytes currently added to the counters
  bool paged_ = false;
  MemCategory category_ = MemCategory::other;
  MemoryCounters* counters_ = nullptr;
  ExternalMemory* external_ = nullptr;  // not host memory: released and zeroed through it
};

}  // namespace tessera
