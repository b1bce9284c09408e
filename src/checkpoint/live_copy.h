// A copy of byte ranges that their owner is about to change, made on the saving thread at memory
// speed while the owner keeps working; the owner takes over whatever is left the moment it needs
// its buffers back (freeze), so it waits at most for the one slice being copied.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <vector>

namespace tessera::checkpoint {

class LiveCopy {
 public:
  // The ranges are copied, concatenated in the order added, into `into` (resized to their total;
  // keeping it across saves keeps its pages mapped). `into` must outlive this object.
  explicit LiveCopy(std::vector<std::byte>& into) : into_(into) {}
  // run() copies this much between looks at freeze(): small enough that freeze() waits little
  // for the slice in flight, large enough that the lock is taken rarely.
  static constexpr size_t kSliceBytes = size_t{4} << 20;
  // Before run() and freeze().
  void add(const void* data, size_t bytes);
  // Saving thread: copies slice by slice until everything is copied or freeze() takes over, and
  // returns once the whole copy is in place (freeze's part included).
  void run();
  // Owner thread, before it changes the ranges: copies what run() has not begun (all of it if run
  // has not started), waits for the slice in flight, and returns the bytes it copied. Afterwards
  // nothing reads the ranges. Call at most once.
  size_t freeze();
  // Called on the saving thread after each slice it copies, while that slice still counts as in
  // flight (so freeze() is still waiting for it): lets a test hold a slice in flight. Before run().
  void on_slice_copied(std::function<void(size_t end)> hook) { on_slice_copied_ = std::move(hook); }
  // The copy of byte `offset` of the concatenation (valid once run() has returned).
  const std::byte* copied(size_t offset) const { return into_.data() + offset; }

 private:
  struct Range {
    const std::byte* data;
    size_t bytes, at;  // `at`: its offset in the concatenation
  };
  void prepare_locked();                   // sizes into_ (by whichever thread comes first)
  void copy_out(size_t from, size_t n);    // ranges' bytes [from, from + n) into into_
  std::vector<std::byte>& into_;
  std::vector<Range> ranges_;
  std::function<void(size_t)> on_slice_copied_;
  size_t total_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool prepared_ = false;
  size_t claimed_ = 0;       // bytes before this are copied or being copied by run()
  bool in_flight_ = false;   // run() is copying the slice that ends at claimed_
  bool frozen_ = false;      // freeze() owns [claimed_, total_)
  bool freeze_done_ = false; // and has copied it
};

}  // namespace tessera::checkpoint
