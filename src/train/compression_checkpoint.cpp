// Gradient compression's per-replica state <-> checkpoint keys "compression/...".
#include "train/compression_checkpoint.h"

namespace tessera {

std::string compression_key_prefix(bool whole_replica, int stage, int chunk, int tp_rank) {
  if (whole_replica) return "compression/";
  return "compression/stage" + std::to_string(stage) + ".chunk" + std::to_string(chunk) + ".tp" +
         std::to_string(tp_rank) + "/";
}

std::vector<ExtraTensor> compression_checkpoint_tensors(const std::vector<CompressionState>& state, int dp_rank,
                                                        int dp_size, const std::string& prefix) {
  std::vector<ExtraTensor> out;
  for (const CompressionState& s : state)
    out.push_back({prefix + s.name, {dp_size, s.numel}, dp_rank * s.numel, s.numel, s.data});
  return out;
}

Result<std::string> restore_compression_state(const checkpoint::CheckpointReader& reader,
                                              const std::vector<CompressionState>& spans, int dp_rank, int dp_size,
                                              const std::string& prefix) {
  // Check every tensor first: the state is restored whole or not at all.
  for (const CompressionState& s : spans) {
    const checkpoint::TensorEntry* saved = reader.find(prefix + s.name);
    if (!saved) return "the checkpoint holds no " + prefix + s.name;
    if (saved->global_shape != std::vector<int64_t>{dp_size, s.numel})
      return prefix + s.name + " was saved with shape [" + std::to_string(saved->global_shape.front()) + ", " +
             std::to_string(saved->global_shape.back()) + "], this job has [" + std::to_string(dp_size) + ", " +
             std::to_string(s.numel) + "] (another parallel.dp or model)";
  }
  for (const CompressionState& s : spans)
    TS_RETURN_IF_ERROR(reader.read_f32(prefix + s.name, dp_rank * s.numel, s.numel, s.data));
  return std::string();
}

}  // namespace tessera
