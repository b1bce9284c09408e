// A training checkpoint <-> a consolidated directory (`tessera checkpoint convert`):
//   model.safetensors      parameters, Hugging Face names and layouts (as `tessera export` writes)
//   optimizer.safetensors  AdamW moments as whole global f32 tensors, named by their checkpoint keys
//                          ("adam_m/<tessera name>", "adam_v/<tessera name>")
//   extra.safetensors      only when the checkpoint holds other f32 tensors (e.g. local SGD state), by key
//   state.json             the checkpoint's training state (step, loader, adam_steps, run_config, ...)
//                          and "model_config", the model it was saved for
// The reverse writes a new one-rank checkpoint through the checkpoint writer (atomic, never over an
// existing one), tensor for tensor as a one-rank run saves it, so a round trip is bitwise.
#pragma once
#include <cstdint>
#include <string>

#include "core/status.h"

namespace tessera {

inline constexpr const char* kConsolidatedModelFile = "model.safetensors";
inline constexpr const char* kConsolidatedOptimizerFile = "optimizer.safetensors";
inline constexpr const char* kConsolidatedExtraFile = "extra.safetensors";
inline constexpr const char* kConsolidatedStateFile = "state.json";  // written last: its presence marks a whole export
inline constexpr const char* kConsolidatedFormat = "tessera-consolidated-checkpoint";

struct ConvertSummary {
  std::string from, to;  // what was read and what was written (the new step directory for an import)
  int64_t step = 0;
  int ranks = 1;         // ranks that saved the source checkpoint (1 for an import)
  int64_t tensors = 0;   // model tensors
  int64_t bytes = 0;     // bytes of parameters and moments written
};

// Writes checkpoint `checkpoint_dir` (a step_<n> directory, any layout) as a consolidated directory
// `out_dir` (created; refused when it already holds any of the three files).
Result<ConvertSummary> export_consolidated(const std::string& checkpoint_dir, const std::string& out_dir);

// Writes consolidated directory `dir` as the complete checkpoint <run_dir>/checkpoints/step_<n>
// (n from state.json); refused when that checkpoint exists.
Result<ConvertSummary> import_consolidated(const std::string& dir, const std::string& run_dir);

// True when `dir` holds a consolidated state.json (what import_consolidated reads).
bool is_consolidated_dir(const std::string& dir);

}  // namespace tessera
