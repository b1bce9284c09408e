// Counted aligned allocation.
#include "core/memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <algorithm>
#include <utility>
#include <vector>

namespace tessera {
namespace {
std::mutex g_mu;
MemoryStats g_stats;

void add_to(MemoryStats& s, MemCategory c, long long delta) {
  auto i = static_cast<size_t>(c);
  s.live[i] = static_cast<size_t>(static_cast<long long>(s.live[i]) + delta);
  s.total_live = static_cast<size_t>(static_cast<long long>(s.total_live) + delta);
  if (s.live[i] > s.peak[i]) s.peak[i] = s.live[i];
  if (s.total_live > s.total_peak) s.total_peak = s.total_live;
}

void account(MemCategory c, long long delta) {
  std::lock_guard<std::mutex> lock(g_mu);
  add_to(g_stats, c, delta);
}
}  // namespace

void MemoryCounters::add(MemCategory c, long long delta) {
  std::lock_guard<std::mutex> lock(mu_);
  add_to(stats_, c, delta);
}

MemoryStats MemoryCounters::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Buffer::count(long long delta) {
  if (!external_) account(category_, delta);
  if (counters_) counters_->add(category_, delta);
}

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

static size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

Buffer::Buffer(size_t bytes, MemCategory category, Residency residency, MemoryCounters* counters)
    : bytes_(bytes), paged_(residency == Residency::paged), category_(category), counters_(counters) {
  if (bytes == 0) return;
  if (paged_) {
    const size_t ps = page_size();
    mapped_ = (bytes + ps - 1) / ps * ps;
    void* p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    // Transparent huge pages where the kernel offers them on request: a ZeRO rank hands a layer's
    // pages back after each use and faults them in again at the next gather, and at 4 KiB a page
    // those faults (each also zeroing its page) cost ZeRO 3 15-20 % of its step on bench-small
    // (bench/zero_page_faults.sh). Whole huge pages inside a discarded range go back; partial ones
    // are split by the kernel. Ignored where THP is off.
    madvise(p, mapped_, MADV_HUGEPAGE);
    data_ = p;  // zero-filled by the kernel; nothing resident (or counted) until touched
    return;
  }
  size_t rounded = (bytes + 63) / 64 * 64;
  data_ = std::aligned_alloc(64, rounded);
  if (!data_) throw std::bad_alloc();
  std::memset(data_, 0, rounded);
  counted_ = bytes_;
  count(static_cast<long long>(counted_));
}

Buffer::Buffer(ExternalMemory& owner, void* data, size_t bytes, MemCategory category, MemoryCounters* counters)
    : data_(data), bytes_(bytes), category_(category), counters_(counters), external_(&owner) {
  counted_ = data_ ? bytes_ : 0;
  count(static_cast<long long>(counted_));
}

Buffer::~Buffer() { release(); }

void Buffer::release() {
  if (data_) {
    if (external_) external_->release(data_, bytes_);
    else if (paged_) munmap(data_, mapped_);
    else std::free(data_);
    count(-static_cast<long long>(counted_));
  }
  data_ = nullptr;
  bytes_ = mapped_ = counted_ = 0;
}

Buffer::Buffer(Buffer&& o) noexcept
    : data_(o.data_), bytes_(o.bytes_), mapped_(o.mapped_), counted_(o.counted_), paged_(o.paged_),
      category_(o.category_), counters_(o.counters_), external_(o.external_) {
  o.data_ = nullptr;
  o.bytes_ = o.mapped_ = o.counted_ = 0;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_;
    bytes_ = o.bytes_;
    mapped_ = o.mapped_;
    counted_ = o.counted_;
    paged_ = o.paged_;
    category_ = o.category_;
    counters_ = o.counters_;
    external_ = o.external_;
    o.data_ = nullptr;
    o.bytes_ = o.mapped_ = o.counted_ = 0;
  }
  return *this;
}

namespace {
// The whole pages inside [offset, offset + n) of a page-aligned mapping: [first, last) in bytes.
std::pair<size_t, size_t> whole_pages(size_t offset, size_t n) {
  const size_t ps = page_size();
  const size_t first = (offset + ps - 1) / ps * ps, last = (offset + n) / ps * ps;
  return {first, last > first ? last : first};
}
}  // namespace

void Buffer::zero_range(size_t offset, size_t n) {
  if (n == 0) return;
  char* base = static_cast<char*>(data_);
  if (external_) {
    external_->zero(base + offset, n);
    return;
  }
  if (!paged_) {
    std::memset(base + offset, 0, n);
    return;
  }
  const auto [first, last] = whole_pages(offset, n);
  if (first >= last) {
    std::memset(base + offset, 0, n);
    return;
  }
  std::memset(base + offset, 0, first - offset);
  madvise(base + first, last - first, MADV_DONTNEED);  // private anonymous pages read back as zero
  std::memset(base + last, 0, offset + n - last);
}

void Buffer::discard_range(size_t offset, size_t n) {
  if (!paged_ || n == 0) return;
  const auto [first, last] = whole_pages(offset, n);
  if (first < last) madvise(static_cast<char*>(data_) + first, last - first, MADV_DONTNEED);
}

size_t Buffer::sample_residency() {
  if (!paged_ || !data_) return counted_;
  std::vector<unsigned char> vec(mapped_ / page_size());
  size_t resident = 0;
  if (mincore(data_, mapped_, vec.data()) == 0)
    for (unsigned char v : vec) resident += (v & 1) ? page_size() : 0;
  resident = std::min(resident, bytes_);
  count(static_cast<long long>(resident) - static_cast<long long>(counted_));
  counted_ = resident;
  return resident;
}

}  // namespace tessera
