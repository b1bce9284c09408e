// Helpers for the checkpoint tests: a scratch run directory removed afterwards (../test_util.h), one-call
// saves that go through the same write_shard / write_manifest / finalize steps a trainer uses, and a
// two-rank checkpoint fixture for the tests that damage one.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/catalog.h"
#include "checkpoint/reader.h"
#include "checkpoint/writer.h"
#include "../test_util.h"

namespace tessera::checkpoint::testing {

using ScratchDir = tessera::testing::TempDir;

inline std::vector<float> iota_floats(int64_t n, float start) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = start + 0.25f * static_cast<float>(i);
  return v;
}

// Saves one f32 tensor per key, whole, from a single rank.
inline Status save_single(const std::string& run_dir, int64_t step,
                          const std::vector<std::pair<std::string, std::vector<float>>>& tensors,
                          const nlohmann::json& config = {{"n_layer", 2}},
                          const nlohmann::json& state = nlohmann::json::object()) {
  CheckpointTarget target = checkpoint_target(run_dir, step);
  CheckpointWriter w(target, 0);
  for (const auto& [key, data] : tensors)
    TS_RETURN_IF_ERROR(w.add(key, DType::f32, {static_cast<int64_t>(data.size())}, 0,
                             static_cast<int64_t>(data.size()), data.data()));
  TS_RETURN_IF_ERROR(w.write_shard());
  TS_RETURN_IF_ERROR(write_manifest(target, {w.record()}, config, state));
  return finalize(target);
}

inline std::string slurp(const std::filesystem::path& p) { return tessera::testing::read_file(p); }
inline void spit(const std::filesystem::path& p, const std::string& s) { tessera::testing::write_file(p, s); }

// A two-rank checkpoint of tensors "a" (rank 0) and "b" (split over ranks 0 and 1) at step 5.
class DamagedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = iota_floats(32, 0.f);
    b_ = iota_floats(48, 100.f);
    CheckpointTarget t = checkpoint_target(run_.str(), 5);
    CheckpointWriter w0(t, 0), w1(t, 1);
    ASSERT_TRUE(w0.add("a", DType::f32, {4, 8}, 0, 32, a_.data()).ok());
    ASSERT_TRUE(w0.add("b", DType::f32, {6, 8}, 0, 20, b_.data()).ok());
    ASSERT_TRUE(w1.add("b", DType::f32, {6, 8}, 20, 28, b_.data() + 20).ok());
    ASSERT_TRUE(w0.write_shard().ok());
    ASSERT_TRUE(w1.write_shard().ok());
    config_ = {{"arch", "gpt2"}, {"n_layer", 2}, {"d_model", 64}, {"attn", {{"n_head", 4}}}};
    ASSERT_TRUE(write_manifest(t, {w0.record(), w1.record()}, config_, {{"step", 5}}).ok());
    ASSERT_TRUE(finalize(t).ok());
    dir_ = t.final_dir();
  }
  std::filesystem::path file(const char* name) const { return std::filesystem::path(dir_) / name; }
  const TensorPiece& piece(const CheckpointReader& r, const char* key, size_t i) const {
    return r.find(key)->pieces.at(i);
  }

  ScratchDir run_;
  std::vector<float> a_, b_;
  nlohmann::json config_;
  std::string dir_;
};

}  // namespace tessera::checkpoint::testing
