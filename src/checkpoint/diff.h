// Comparing two checkpoints tensor by tensor (`tessera checkpoint diff`), whatever layouts saved
// them: each tensor is read whole from both (memory: two copies of the largest tensor) and compared
// element by element; a difference is located in the saved pieces (which ranks' ranges differ).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/reader.h"
#include "core/status.h"

namespace tessera::checkpoint {

enum class TensorDiffKind { equal, differs, only_in_a, only_in_b, shape_differs };
const char* tensor_diff_kind_name(TensorDiffKind kind);  // "equal", "differs", "only_in_a", ...

// A saved piece (by rank and element range) of one checkpoint that holds a differing element.
struct DifferingPiece {
  int rank = 0;
  int64_t begin = 0, end = 0;
};

struct TensorDiff {
  std::string key;
  TensorDiffKind kind = TensorDiffKind::equal;
  std::optional<uint64_t> fingerprint_a, fingerprint_b;  // as saved (absent: older checkpoints)
  int64_t numel = 0;
  int64_t differing = 0;            // elements whose bits differ
  int64_t first_difference = -1;    // flat index of the first one
  std::optional<double> max_abs_diff;  // f32 tensors that differ (NaN against a number counts as inf)
  std::vector<DifferingPiece> pieces_a, pieces_b;
  std::string detail;               // e.g. "f32 [2,3] vs f32 [3,2]"
};

struct CheckpointDiff {
  std::string a, b;
  int ranks_a = 0, ranks_b = 0;
  std::vector<std::string> config_differences;  // model config, "field a vs b"
  std::vector<std::string> state_differences;   // training state (step, loader, adam_steps, run config)
  std::vector<TensorDiff> tensors;              // every key of either, sorted
  bool equal() const;                           // no tensor, config or state difference
};

// Compares checkpoint directories `a` and `b` (step_<N> directories; both opened and validated).
// A damaged piece (checksum) is an error naming it, not a difference.
Result<CheckpointDiff> diff_checkpoints(const std::string& a, const std::string& b);

}  // namespace tessera::checkpoint
