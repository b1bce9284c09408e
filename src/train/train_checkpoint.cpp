// Training state <-> checkpoint: one key per tensor ("param/<name>", "adam_m/<name>",
// "adam_v/<name>"), so any later layout (ZeRO shards, pipeline stages) can read its own ranges.
#include "train/train_checkpoint.h"

#include <algorithm>

#include "checkpoint/catalog.h"
#include "checkpoint/gather_records.h"
#include "checkpoint/reader.h"
#include "checkpoint/writer.h"
#include "model/config_json.h"

namespace tessera {

Status save_training_checkpoint(Communicator& comm, const std::string& run_dir, const ModelConfig& cfg,
                                const ParamStore& store, AdamW& opt, FlatRange owned, const TrainingState& state,
                                int keep_last, const nlohmann::json& run_config) {
  // Every rank must agree on the staging directory name: use rank 0's tag.
  uint64_t tag = checkpoint::default_staging_tag();
  TS_RETURN_IF_ERROR(comm.broadcast(&tag, sizeof tag, DType::u8, 0));
  const auto target = checkpoint::checkpoint_target(run_dir, state.step, tag);
  checkpoint::CheckpointWriter w(target, comm.rank());
  Status local;
  for (const auto& p : store.layout().params()) {
    // The part of this tensor inside the owned range (possibly empty: the key is still known).
    const int64_t lo = std::clamp(owned.begin, p.offset, p.offset + p.numel);
    const int64_t hi = std::clamp(owned.end, p.offset, p.offset + p.numel);
    const int64_t opt_off = lo - opt.begin();
    for (auto [prefix, base] : {std::pair<const char*, const float*>{"param/", store.params() + lo},
                                {"adam_m/", opt.m() + opt_off}, {"adam_v/", opt.v() + opt_off}}) {
      local = w.add(prefix + p.name, DType::f32, p.shape, lo - p.offset, hi - lo, base);
      if (!local.ok()) break;
    }
    if (!local.ok()) break;
  }
  if (local.ok()) local = w.write_shard();
  TS_ASSIGN_OR_RETURN(std::vector<checkpoint::ShardRecord> records,
                      checkpoint::all_gather_records(comm, local, w.record()));
  if (comm.rank() == 0) {
    nlohmann::json st = {{"step", state.step},
                         {"loader", {{"epoch", state.loader.epoch}, {"index", state.loader.index}}},
                         {"adam_steps", state.adam_steps},
                         {"run_config", run_config}};
    local = checkpoint::write_manifest(target, records, model_config_json(cfg), st);
    if (local.ok()) local = checkpoint::finalize(target);
    if (local.ok()) local = checkpoint::prune_checkpoints(run_dir, keep_last);
  }
  // Everyone learns whether rank 0 succeeded, so all ranks fail (or continue) together.
  int32_t ok = local.ok() ? 1 : 0;
  TS_RETURN_IF_ERROR(comm.broadcast(&ok, 1, DType::i32, 0));
  if (!ok) return local.ok() ? io_error("checkpoint failed on rank 0 of " + comm.name()) : local;
  return Status::ok_status();
}

Result<TrainingState> load_training_checkpoint(const std::string& checkpoint_dir, const ModelConfig& cfg,
                                               ParamStore& store, AdamW* opt) {
  TS_ASSIGN_OR_RETURN(checkpoint::CheckpointReader reader, checkpoint::open_checkpoint(checkpoint_dir));
  TS_RETURN_IF_ERROR(reader.check_compatible(model_config_json(cfg)));
  for (const auto& p : store.layout().params()) {
    TS_RETURN_IF_ERROR(reader.read_f32("param/" + p.name, 0, p.numel, store.params() + p.offset));
    if (opt) {
      const int64_t local_off = p.offset - opt->begin();
      TS_RETURN_IF_ERROR(reader.read_f32("adam_m/" + p.name, 0, p.numel, opt->m() + local_off));
      TS_RETURN_IF_ERROR(reader.read_f32("adam_v/" + p.name, 0, p.numel, opt->v() + local_off));
    }
  }
  TrainingState st;
  try {
    const auto& s = reader.state();
    st.step = s.at("step");
    st.loader.epoch = s.at("loader").at("epoch");
    st.loader.index = s.at("loader").at("index");
    st.adam_steps = s.at("adam_steps");
  } catch (const std::exception& e) {
    return corrupt_data("checkpoint " + checkpoint_dir + " has an incomplete training state (" + e.what() +
                        "); it cannot be resumed, start a new run or pick another checkpoint");
  }
  if (opt) opt->set_steps_taken(st.adam_steps);
  return st;
}

}  // namespace tessera
