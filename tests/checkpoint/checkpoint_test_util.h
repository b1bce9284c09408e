// Helpers for the checkpoint tests: a scratch run directory removed afterwards (../test_util.h), and one-call
// saves that go through the same write_shard / write_manifest / finalize steps a trainer uses.
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

}  // namespace tessera::checkpoint::testing
