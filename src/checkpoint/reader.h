// Loading a checkpoint: validates the directory up front (COMPLETE marker, manifest, every shard
// file present with its recorded size), then reads any flattened range of any tensor, assembled
// from whichever saved pieces cover it -- this is what lets a run resume under another layout.
// Reading never modifies files.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/format.h"
#include "core/status.h"

namespace tessera::checkpoint {

class CheckpointReader {
 public:
  const std::string& path() const { return path_; }
  int64_t step() const { return manifest_.step; }
  int world_size() const { return manifest_.world_size; }  // ranks that saved it
  const nlohmann::json& config() const { return manifest_.config; }
  const nlohmann::json& state() const { return manifest_.state; }
  const std::vector<TensorEntry>& tensors() const { return manifest_.tensors; }
  const TensorEntry* find(std::string_view key) const;  // nullptr if absent

  // Copies elements [global_offset, global_offset + numel) of the flattened tensor `key` into
  // `dst` (numel * dtype_size bytes, in the saved dtype). Every piece it touches is read whole and
  // its checksum verified; a mismatch is a corrupt_data error naming the file and the key.
  Status read(std::string_view key, int64_t global_offset, int64_t numel, void* dst) const;
  // As read(), and also checks that the tensor was saved as f32.
  Status read_f32(std::string_view key, int64_t global_offset, int64_t numel, float* dst) const;

  // Checks that `key` was saved with this dtype and global shape (the loader's layout may split
  // it differently, but the logical tensor must be the same).
  Status check_tensor(std::string_view key, DType dtype, const std::vector<int64_t>& global_shape) const;

  // Compares the saved model config with `expected` field by field (nested objects by dotted
  // path) and, when any differ, says which: "n_layer 2 vs 4 (checkpoint vs expected)".
  Status check_compatible(const nlohmann::json& expected_config) const;

 private:
  friend Result<CheckpointReader> open_checkpoint(const std::string& path);
  std::string path_;
  Manifest manifest_;
  std::map<std::string, size_t, std::less<>> index_;  // key -> position in manifest_.tensors
};

// Opens <path> (a step_<%08d> directory, e.g. find_latest_complete(run_dir)->path).
Result<CheckpointReader> open_checkpoint(const std::string& path);

// The first half of open_checkpoint: the COMPLETE marker and the fully validated manifest of the
// checkpoint directory <path>, without looking at the shard files (`tessera checkpoint inspect`
// checks those itself, to name every damaged piece rather than stop at the first bad file).
Result<Manifest> read_manifest(const std::string& path);

// The differing fields of two config objects, as "field a vs b" strings (empty when equal).
std::vector<std::string> config_differences(const nlohmann::json& saved, const nlohmann::json& expected);

}  // namespace tessera::checkpoint
