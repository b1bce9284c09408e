// Aligned host buffers whose bytes are counted per category (live and peak), so that a run can
// report where its memory goes. Buffers are allocated once at set-up; the training step allocates none.
#pragma once
#include <array>
#include <atomic>
#include <cstddef>
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

// Owning, 64-byte aligned, zero-initialised buffer.
class Buffer {
 public:
  Buffer() = default;
  Buffer(size_t bytes, MemCategory category);
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

 private:
  void release();
  void* data_ = nullptr;
  size_t bytes_ = 0;
  MemCategory category_ = MemCategory::other;
};

}  // namespace tessera
