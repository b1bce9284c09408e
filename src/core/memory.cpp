// Counted aligned allocation.
#include "core/memory.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

namespace tessera {
namespace {
std::mutex g_mu;
MemoryStats g_stats;

void account(MemCategory c, long long delta) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto i = static_cast<size_t>(c);
  g_stats.live[i] = static_cast<size_t>(static_cast<long long>(g_stats.live[i]) + delta);
  g_stats.total_live = static_cast<size_t>(static_cast<long long>(g_stats.total_live) + delta);
  if (g_stats.live[i] > g_stats.peak[i]) g_stats.peak[i] = g_stats.live[i];
  if (g_stats.total_live > g_stats.total_peak) g_stats.total_peak = g_stats.total_live;
}
}  // namespace

std::string_view mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::parameters: return "parameters";
    case MemCategory::gradients: return "gradients";
    case MemCategory::optimizer_state: return "optimizer_state";
    case MemCategory::activations: return "activations";
    case MemCategory::communication: return "communication";
    case MemCategory::other: return "other";
  }
  return "?";
}

MemoryStats memory_stats() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_stats;
}

void reset_memory_peaks() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_stats.peak = g_stats.live;
  g_stats.total_peak = g_stats.total_live;
}

Buffer::Buffer(size_t bytes, MemCategory category) : bytes_(bytes), category_(category) {
  if (bytes == 0) return;
  size_t rounded = (bytes + 63) / 64 * 64;
  data_ = std::aligned_alloc(64, rounded);
  if (!data_) throw std::bad_alloc();
  std::memset(data_, 0, rounded);
  account(category_, static_cast<long long>(bytes_));
}

Buffer::~Buffer() { release(); }

void Buffer::release() {
  if (data_) {
    std::free(data_);
    account(category_, -static_cast<long long>(bytes_));
  }
  data_ = nullptr;
  bytes_ = 0;
}

Buffer::Buffer(Buffer&& o) noexcept : data_(o.data_), bytes_(o.bytes_), category_(o.category_) {
  o.data_ = nullptr;
  o.bytes_ = 0;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_;
    bytes_ = o.bytes_;
    category_ = o.category_;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

}  // namespace tessera
