// Local SGD's outer and per-replica state <-> checkpoint keys "local_sgd/...".
#include "train/local_sgd_checkpoint.h"

#include "checkpoint/reader.h"

namespace tessera {

namespace {

// Keys and what they hold: the outer state is split over the replicas, the inner state is per replica.
struct LocalKeys {
  explicit LocalKeys(const std::string& prefix)
      : anchor(prefix + "anchor"), momentum(prefix + "outer_momentum"), params(prefix + "replica_params"),
        adam_m(prefix + "replica_adam_m"), adam_v(prefix + "replica_adam_v") {}
  std::string anchor, momentum, params, adam_m, adam_v;
};

}  // namespace

std::string local_sgd_key_prefix(bool whole_replica, int stage, int chunk, int tp_rank) {
  if (whole_replica) return "local_sgd/";
  return "local_sgd/stage" + std::to_string(stage) + ".chunk" + std::to_string(chunk) + ".tp" +
         std::to_string(tp_rank) + "/";
}

std::vector<ExtraTensor> local_sgd_checkpoint_tensors(LocalSgd& s, const std::string& prefix) {
  const LocalKeys k(prefix);
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

Status restore_local_sgd_state(const std::string& checkpoint_dir, LocalSgd& s, const std::string& prefix) {
  const LocalKeys k(prefix);
  TS_ASSIGN_OR_RETURN(checkpoint::CheckpointReader reader, checkpoint::open_checkpoint(checkpoint_dir));
  const checkpoint::TensorEntry* saved = reader.find(k.params);
  if (!saved) {
    for (const checkpoint::TensorEntry& t : reader.tensors())
      if (t.key.rfind("local_sgd/", 0) == 0)
        return invalid_argument("checkpoint " + checkpoint_dir + " holds local SGD state of another layout (" + t.key +
                                ", not " + k.params + "): resume with the parallel.tp / parallel.pp it was saved "
                                "with (per-replica state does not reshard)");
    return Status::ok_status();  // synchronous training saved it: start local SGD here
  }
  const int64_t n = s.store().numel(), dp = s.dp().size(), r = s.dp().rank();
  if (saved->global_shape.size() != 2 || saved->global_shape[1] != n)
    return invalid_argument("checkpoint " + checkpoint_dir + " holds local SGD state for another model size or "
                            "layout: resume with the model and parallel.tp / parallel.pp it was saved with");
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
