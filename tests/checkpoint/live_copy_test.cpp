// LiveCopy: whichever thread copies which part, the copy holds the ranges as they were before
// freeze(), and the owner may overwrite them as soon as freeze() returns.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/live_copy.h"

namespace tessera::checkpoint {
namespace {

// Ranges of uneven sizes (one empty) that together span several copy slices.
const std::vector<size_t> kSeveralSlices = {(size_t{9} << 20) + 13, 0, 777, (size_t{5} << 20) + 1};

struct Sources {
  std::vector<std::vector<std::byte>> ranges;
  std::vector<std::byte> expected;  // their concatenation before anyone changes them
  explicit Sources(const std::vector<size_t>& sizes = kSeveralSlices) {
    uint32_t x = 12345;
    for (size_t n : sizes) {
      std::vector<std::byte> r(n);
      for (auto& b : r) {
        x = x * 1664525u + 1013904223u;
        b = static_cast<std::byte>(x >> 24);
      }
      expected.insert(expected.end(), r.begin(), r.end());
      ranges.push_back(std::move(r));
    }
  }
  void add_to(LiveCopy& copy) const {
    for (const auto& r : ranges) copy.add(r.data(), r.size());
  }
  // Back to front, so that an overwrite racing a copy in flight is caught rather than outrun.
  void overwrite() {
    for (auto r = ranges.rbegin(); r != ranges.rend(); ++r) std::fill(r->rbegin(), r->rend(), std::byte{0xEE});
  }
};

void expect_copy_is(const LiveCopy& copy, const std::vector<std::byte>& expected) {
  const std::byte* got = copy.copied(0);
  size_t first_bad = expected.size();
  for (size_t i = 0; i < expected.size(); ++i)
    if (got[i] != expected[i]) {
      first_bad = i;
      break;
    }
  EXPECT_EQ(first_bad, expected.size()) << "the copy differs from the ranges at byte " << first_bad;
}

TEST(LiveCopy, RunAloneCopiesEverythingAndFreezeAfterwardsCopiesNothing) {
  Sources src;
  std::vector<std::byte> scratch;
  LiveCopy copy(scratch);
  src.add_to(copy);
  copy.run();
  EXPECT_EQ(copy.freeze(), 0u);
  src.overwrite();
  expect_copy_is(copy, src.expected);
}

TEST(LiveCopy, FreezeBeforeRunCopiesEverythingItself) {
  Sources src;
  std::vector<std::byte> scratch;
  LiveCopy copy(scratch);
  src.add_to(copy);
  EXPECT_EQ(copy.freeze(), src.expected.size());
  src.overwrite();
  copy.run();  // returns at once: nothing is left for it
  expect_copy_is(copy, src.expected);
}

TEST(LiveCopy, FreezeDuringRunTakesOverTheRestAndTheOwnerMayOverwriteAtOnce) {
  // Repeated so that freeze() lands before, inside and after the saving thread's slices.
  for (int trial = 0; trial < 8; ++trial) {
    Sources src;
    std::vector<std::byte> scratch(3);  // smaller than needed: run or freeze grows it
    LiveCopy copy(scratch);
    src.add_to(copy);
    std::thread saver([&] { copy.run(); });
    if (trial % 2) std::this_thread::yield();
    const size_t by_owner = copy.freeze();
    src.overwrite();  // the owner's next update
    saver.join();
    EXPECT_LE(by_owner, src.expected.size());
    expect_copy_is(copy, src.expected);
  }
}

TEST(LiveCopy, FreezeDoesNotReturnWhileASliceIsInFlight) {
  // The saving thread holds its first slice in flight for a while; freeze() has only the rest (one
  // byte) to copy but must not return before that slice is done, or the owner would overwrite
  // bytes the slice is still reading.
  Sources src({LiveCopy::kSliceBytes, 1});
  std::vector<std::byte> scratch;
  LiveCopy copy(scratch);
  src.add_to(copy);
  std::mutex mu;
  std::condition_variable cv;
  bool slice_in_flight = false, freeze_returned = false, freeze_returned_during_slice = false;
  copy.on_slice_copied([&](size_t) {
    std::unique_lock<std::mutex> lk(mu);
    slice_in_flight = true;
    cv.notify_all();
    // Long enough for a freeze() that does not wait to return; a correct one returns only after.
    cv.wait_for(lk, std::chrono::milliseconds(300), [&] { return freeze_returned; });
    freeze_returned_during_slice = freeze_returned;
  });
  std::thread saver([&] { copy.run(); });
  {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return slice_in_flight; });
  }
  EXPECT_EQ(copy.freeze(), 1u);
  {
    std::lock_guard<std::mutex> lk(mu);
    freeze_returned = true;
    cv.notify_all();
  }
  saver.join();
  EXPECT_FALSE(freeze_returned_during_slice) << "freeze() returned while the saving thread was still copying a slice";
  src.overwrite();
  expect_copy_is(copy, src.expected);
}

}  // namespace
}  // namespace tessera::checkpoint
