// Local SGD's outer and per-replica state <-> checkpoint keys "local_sgd/...".
#include "train/local_sgd_checkpoint.h"

#include "checkpoint/reader.h"

namespace tessera {

namespace {

// Keys and what they hold: the outer state is split over the replicas, the inner state is per replica.
struct LocalKeys {
  const char* anchor = "local_sgd/anchor";
  const char* momentum = "local_sgd/outer_momentum";
  const char* params = "local_sgd/replica_params";
  const char* adam_m = "local_sgd/replica_adam_m";
  const char* adam_v = "local_sgd/replica_adam_v";
};

}  // namespace

std::vector<ExtraTensor> local_sgd_checkpoint_tensors(LocalSgd& s) {
  const LocalKeys k;
  const int64_t n = s.store().numel(), dp = s.dp().size(), r = s.dp().rank();
  const FlatRange own = s.checkpoint_range();
  AdamW& opt = s.inner_optimizer();
  return {
      {k.anchor, {n}, own.begin, own.numel(), s.anchor() + own.begin},
      {k.momentum, {n}, own.begin, own.numel(), s.outer_momentum() + own.begin},
      {k.params, {dp, n}, r * n, n, s.store().params()},
      {k.adam_m, {dp, n}, r * n, n, opt.m()},
      {k.adam_v, {dp, n}, r * n, n, opt.v()},
  };
}

Status restore_local_sgd_state(const std::string& checkpoint_dir, LocalSgd& s) {
  const LocalKeys k;
  TS_ASSIGN_OR_RETURN(checkpoint::CheckpointReader reader, checkpoint::open_checkpoint(checkpoint_dir));
  const checkpoint::TensorEntry* saved = reader.find(k.params);
  if (!saved) return Status::ok_status();  // synchronous training saved it: start local SGD here
  const int64_t n = s.store().numel(), dp = s.dp().size(), r = s.dp().rank();
  if (saved->global_shape.size() != 2 || saved->global_shape[1] != n)
    return invalid_argument("checkpoint " + checkpoint_dir + " holds local SGD state for another model size: "
                            "resume with the model it was saved with");
  if (saved->global_shape[0] != dp)
    return invalid_argument("checkpoint " + checkpoint_dir + " holds the local SGD state of " +
                            std::to_string(saved->global_shape[0]) + " replicas, this job has parallel.dp = " +
                            std::to_string(dp) + ": resume with parallel.dp = " +
                            std::to_string(saved->global_shape[0]) + " (per-replica state does not reshard)");
  AdamW& opt = s.inner_optimizer();
  TS_RETURN_IF_ERROR(reader.read_f32(k.anchor, 0, n, s.anchor()));
  TS_RETURN_IF_ERROR(reader.read_f32(k.momentum, 0, n, s.outer_momentum()));
  TS_RETURN_IF_ERROR(reader.read_f32(k.params, r * n, n, s.store().params()));
  TS_RETURN_IF_ERROR(reader.read_f32(k.adam_m, r * n, n, opt.m()));
  TS_RETURN_IF_ERROR(reader.read_f32(k.adam_v, r * n, n, opt.v()));
  s.mark_restored();
  return Status::ok_status();
}

}  // namespace tessera
