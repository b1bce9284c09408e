// LiveCopy: the saving thread copies slice by slice; freeze() claims the rest under the lock.
#include "checkpoint/live_copy.h"

#include <algorithm>
#include <cstring>

#include "core/log.h"

namespace tessera::checkpoint {
void LiveCopy::add(const void* data, size_t bytes) {
  std::lock_guard<std::mutex> lk(mu_);
  TS_CHECK(!prepared_);
  ranges_.push_back(Range{static_cast<const std::byte*>(data), bytes, total_});
  total_ += bytes;
}

void LiveCopy::prepare_locked() {
  if (prepared_) return;
  if (into_.size() < total_) into_.resize(total_);
  prepared_ = true;
}

void LiveCopy::copy_out(size_t from, size_t n) {
  const size_t end = from + n;
  // The first range that ends after `from`.
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), from,
                             [](size_t x, const Range& r) { return x < r.at + r.bytes; });
  for (; it != ranges_.end() && it->at < end; ++it) {
    const size_t lo = std::max(from, it->at), hi = std::min(end, it->at + it->bytes);
    if (hi > lo) std::memcpy(into_.data() + lo, it->data + (lo - it->at), hi - lo);
  }
}

void LiveCopy::run() {
  std::unique_lock<std::mutex> lk(mu_);
  prepare_locked();
  while (!frozen_ && claimed_ < total_) {
    const size_t from = claimed_, n = std::min(kSliceBytes, total_ - from);
    claimed_ = from + n;
    in_flight_ = true;
    lk.unlock();
    copy_out(from, n);
    if (on_slice_copied_) on_slice_copied_(from + n);
    lk.lock();
    in_flight_ = false;
    cv_.notify_all();
  }
  cv_.wait(lk, [this] { return !frozen_ || freeze_done_; });
}

size_t LiveCopy::freeze() {
  std::unique_lock<std::mutex> lk(mu_);
  TS_CHECK(!frozen_);
  prepare_locked();
  frozen_ = true;
  const size_t from = claimed_, n = total_ - from;
  lk.unlock();
  copy_out(from, n);  // run() starts no slice past `from` now
  lk.lock();
  freeze_done_ = true;
  cv_.notify_all();
  cv_.wait(lk, [this] { return !in_flight_; });
  return n;
}

}  // namespace tessera::checkpoint
