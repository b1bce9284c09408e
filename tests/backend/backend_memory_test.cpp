// The Backend's memory by category and its streams and events, on the CPU: buffers it allocates are
// counted in its own counters (and the process's), paged buffers count what mincore measured, the
// ParamStore and AdamW allocate there when given the backend, and events are reached when recorded.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "optim/adamw.h"

namespace tessera {
namespace {

size_t live(const MemoryStats& s, MemCategory c) { return s.live[static_cast<size_t>(c)]; }

TEST(BackendMemory, CountsItsOwnBuffersByCategory) {
  CpuBackend be;
  const size_t process_before = memory_stats().total_live;
  {
    Buffer a = be.allocate(1000, MemCategory::gradients);
    Buffer b = be.allocate(4096, MemCategory::communication);
    EXPECT_EQ(live(be.memory_counters(), MemCategory::gradients), 1000u);
    EXPECT_EQ(live(be.memory_counters(), MemCategory::communication), 4096u);
    EXPECT_EQ(be.memory_counters().total_live, 5096u);
    EXPECT_EQ(memory_stats().total_live, process_before + 5096u);  // host memory: the process counts it too
    Buffer moved = std::move(a);  // the count follows the memory
    EXPECT_EQ(be.memory_counters().total_live, 5096u);
    for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(moved.as<unsigned char>()[i], 0) << "zeroed";
  }
  EXPECT_EQ(be.memory_counters().total_live, 0u);
  EXPECT_EQ(be.memory_counters().total_peak, 5096u);
}

TEST(BackendMemory, PagedBuffersCountWhatIsResident) {
  CpuBackend be;
  const size_t bytes = size_t{64} << 20;
  Buffer p = be.allocate(bytes, MemCategory::parameters, Residency::paged);
  EXPECT_EQ(live(be.memory_counters(), MemCategory::parameters), 0u);  // nothing touched yet
  for (size_t i = 0; i < bytes / 2; i += 4096) p.as<char>()[i] = 1;
  const size_t resident = p.sample_residency();
  EXPECT_GE(resident, bytes / 2);
  EXPECT_LT(resident, bytes);
  EXPECT_EQ(live(be.memory_counters(), MemCategory::parameters), resident);
  p.discard_range(0, bytes);
  p.sample_residency();
  EXPECT_LT(live(be.memory_counters(), MemCategory::parameters), size_t{1} << 20);
}

TEST(BackendMemory, ParamStoreAndAdamWAllocateThroughTheBackend) {
  CpuBackend be;
  const ModelConfig cfg = model_preset("tiny").value();
  ParamStore store(ParamLayout(cfg), StoreOptions{.backend = &be});
  AdamW opt(store.layout(), AdamWConfig{}, 0, -1, &be);
  const size_t flat = static_cast<size_t>(store.numel()) * sizeof(float);
  const MemoryStats s = be.memory_counters();
  EXPECT_EQ(live(s, MemCategory::parameters), flat);
  EXPECT_EQ(live(s, MemCategory::gradients), flat);
  EXPECT_EQ(live(s, MemCategory::optimizer_state), 2 * flat);
}

TEST(BackendStreams, CpuEventsAreReachedWhenRecorded) {
  CpuBackend be;
  float x[4] = {1, 2, 3, 4};
  Backend::Event done;
  {
    StreamScope on(be, Backend::Stream::communication);
    be.scale_inplace(x, 4, 2.f);
    done = be.record_event(Backend::Stream::communication);
  }
  be.wait_event(Backend::Stream::compute, done);  // the compute stream's later ops see x scaled
  be.synchronize_event(done);
  EXPECT_EQ(x[3], 8.f);
  EXPECT_NE(be.record_event(Backend::Stream::compute).id, done.id);
  EXPECT_EQ(be.set_stream(Backend::Stream::compute), Backend::Stream::compute);  // the scope restored it
}

}  // namespace
}  // namespace tessera
