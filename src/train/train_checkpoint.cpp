// Training state <-> checkpoint: one key per tensor ("param/<name>", "adam_m/<name>",
// "adam_v/<name>") with its global shape, each rank writing its tensor-parallel pieces (cut to its
// data-parallel range) at their global offsets, so any layout (tp shards, pipeline stages, ZeRO
// shards, the whole model) reads its own ranges.
#include "train/train_checkpoint.h"

#include <algorithm>

#include "checkpoint/catalog.h"
#include "checkpoint/gather_records.h"
#include "checkpoint/reader.h"
#include "checkpoint/writer.h"
#include "model/config_json.h"

namespace tessera {

namespace {

// The last pipeline stage's copy of a tied wte (the head): the first stage saves the real one.
bool is_tied_copy(const ParamLayout& layout, const ParamInfo& p) { return layout.first_layer() > 0 && p.name == "wte"; }

// At most this many elements are read per request when gathering a shard's strided pieces.
constexpr int64_t kMaxReadSpan = int64_t{1} << 24;  // 64 MiB of f32

// Reads the pieces of tensor `key` that fall in local elements [lo, hi) of this rank's shard into
// `dst`, which holds local element lo. Consecutive pieces are fetched with one read of the global
// span covering them (a row-split shard has one piece per row; reading each alone would re-read and
// re-checksum every saved piece it touches once per row) and scattered from `scratch`.
Status read_pieces(const checkpoint::CheckpointReader& reader, const std::string& key,
                   const std::vector<TensorPiece>& all, int64_t lo, int64_t hi, float* dst, std::vector<float>& scratch) {
  std::vector<TensorPiece> pieces;  // cut to [lo, hi); local_offset relative to lo
  for (const TensorPiece& q : all) {
    const int64_t a = std::max(lo, q.local_offset), b = std::min(hi, q.local_offset + q.numel);
    if (b > a) pieces.push_back({a - lo, q.global_offset + (a - q.local_offset), b - a});
  }
  for (size_t i = 0; i < pieces.size();) {
    const int64_t g0 = pieces[i].global_offset;
    size_t j = i + 1;
    while (j < pieces.size() && pieces[j].global_offset >= pieces[j - 1].global_offset + pieces[j - 1].numel &&
           pieces[j].global_offset + pieces[j].numel - g0 <= kMaxReadSpan)
      ++j;
    if (j == i + 1) {
      TS_RETURN_IF_ERROR(reader.read_f32(key, g0, pieces[i].numel, dst + pieces[i].local_offset));
    } else {
      const int64_t g1 = pieces[j - 1].global_offset + pieces[j - 1].numel;
      scratch.resize(static_cast<size_t>(g1 - g0));
      TS_RETURN_IF_ERROR(reader.read_f32(key, g0, g1 - g0, scratch.data()));
      for (size_t k = i; k < j; ++k)
        std::copy_n(scratch.data() + (pieces[k].global_offset - g0), pieces[k].numel, dst + pieces[k].local_offset);
    }
    i = j;
  }
  return Status::ok_status();
}

}  // namespace

std::vector<SavedPiece> checkpoint_pieces(const ParamLayout& layout, FlatRange owned) {
  std::vector<SavedPiece> out;
  for (const ParamInfo& p : layout.params()) {
    if (p.split == TpSplit::replicated && layout.tp().rank != 0) continue;  // tp rank 0 saves it
    if (layout.experts_sharded() && !p.expert && layout.experts().rank != 0) continue;  // ep rank 0 saves it
    if (is_tied_copy(layout, p)) continue;
    const size_t before = out.size();
    for (const TensorPiece& q : layout.shard_pieces(p)) {
      const int64_t begin = p.offset + q.local_offset;
      const int64_t lo = std::clamp(owned.begin, begin, begin + q.numel);
      const int64_t hi = std::clamp(owned.end, begin, begin + q.numel);
      if (hi <= lo) continue;
      SavedPiece s{&p, lo, q.global_offset + (lo - begin), hi - lo};
      // One run where the flat buffer and the global tensor are both contiguous across pieces.
      if (out.size() > before && out.back().flat_offset + out.back().numel == s.flat_offset &&
          out.back().global_offset + out.back().numel == s.global_offset) {
        out.back().numel += s.numel;
      } else {
        out.push_back(s);
      }
    }
    if (out.size() == before) out.push_back({&p, p.offset, 0, 0});  // nothing owned: the key is still known
  }
  return out;
}

Status save_training_checkpoint(Communicator& comm, const std::string& run_dir, const ModelConfig& cfg,
                                const ParamStore& store, AdamW& opt, FlatRange owned, const TrainingState& state,
                                int keep_last, const nlohmann::json& run_config) {
  return save_training_checkpoint(comm, run_dir, cfg, {CheckpointChunk{&store, &opt, owned}}, state, keep_last,
                                  run_config);
}

namespace {
// Whether `be`'s memory is not host memory (a GPU's): the writer cannot read it in place.
bool device_memory(const Backend* be) { return be && be->device() != Device::cpu; }

// Crosses to the host: checkpoint bytes of `be`'s memory (nullptr: host memory) into the snapshot.
// The snapshot is the training stall of an asynchronous save: on the host every thread copies a
// slice (one core's copy does not reach the memory bandwidth); a device's memory is one copy.
void snapshot_copy(Backend* be, float* dst, const float* src, int64_t n) {
  constexpr int64_t kSlice = 1 << 18;
  auto copy = [be](float* d, const float* s, int64_t k) {
    if (be) be->copy_to_host(d, s, static_cast<size_t>(k) * sizeof(float));
    else std::copy_n(s, k, d);
  };
  if (n < 2 * kSlice || device_memory(be)) {
    copy(dst, src, n);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i += kSlice) copy(dst + i, src + i, std::min(kSlice, n - i));
}
}  // namespace

Status add_checkpoint_pieces(checkpoint::CheckpointWriter& w, const std::vector<CheckpointChunk>& chunks,
                             std::vector<float>* snapshot, bool extras_only) {
  struct Source {
    std::string key;
    const SavedPiece* piece;
    const float* data;
    bool extra = false;
    Backend* backend = nullptr;  // whose memory `data` is (nullptr: host memory)
  };
  std::vector<std::vector<SavedPiece>> pieces;
  std::vector<Source> sources;
  for (const CheckpointChunk& c : chunks) {
    if (!c.opt) {  // a rank without optimizer state (a parameter-server worker) saves the run's state only
      if (c.owned.numel() != 0) return invalid_argument("checkpoint: a chunk part without an optimizer must own no elements");
      pieces.emplace_back();
      continue;
    }
    if (c.owned.begin < c.opt->begin() || c.owned.end > c.opt->end())
      return invalid_argument("checkpoint: owned range [" + std::to_string(c.owned.begin) + ", " +
                              std::to_string(c.owned.end) + ") is outside the optimizer's range [" +
                              std::to_string(c.opt->begin()) + ", " + std::to_string(c.opt->end()) + ")");
    pieces.push_back(checkpoint_pieces(c.store->layout(), c.owned));
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    const CheckpointChunk& c = chunks[i];
    for (const SavedPiece& s : pieces[i]) {
      const int64_t opt_off = s.flat_offset - c.opt->begin();
      sources.push_back({"param/" + s.param->name, &s, c.store->params() + s.flat_offset, false, c.store->backend()});
      sources.push_back({"adam_m/" + s.param->name, &s, c.opt->m() + opt_off, false, c.opt->backend()});
      sources.push_back({"adam_v/" + s.param->name, &s, c.opt->v() + opt_off, false, c.opt->backend()});
    }
  }
  // The chunks' extra tensors (local SGD's state) as pieces of their own; reserved: pointed to below.
  size_t n_extra = 0;
  for (const CheckpointChunk& c : chunks) n_extra += c.extra.size();
  std::vector<ParamInfo> extra_info;
  std::vector<SavedPiece> extra_pieces;
  extra_info.reserve(n_extra);
  extra_pieces.reserve(n_extra);
  for (const CheckpointChunk& c : chunks)
    for (const ExtraTensor& e : c.extra) {
      extra_info.push_back(ParamInfo{e.key, {}, 0, e.numel});
      extra_info.back().global_shape = e.global_shape;
      extra_pieces.push_back({&extra_info.back(), 0, e.global_offset, e.numel});
      sources.push_back({e.key, &extra_pieces.back(), e.data, true});
    }
  // A device's memory is always copied: the writer (and a live save's freeze) reads host memory.
  auto copied = [&](const Source& src) { return snapshot && (src.extra || !extras_only || device_memory(src.backend)); };
  for (const Source& src : sources)
    if (!snapshot && device_memory(src.backend))
      return internal_error("checkpoint: '" + src.key + "' is device memory and needs a host snapshot to be written");
  if (snapshot) {  // one allocation, so the pointers handed to the writer stay valid
    size_t total = 0;
    for (const Source& src : sources)
      if (copied(src)) total += static_cast<size_t>(src.piece->numel);
    snapshot->resize(total);
  }
  size_t at = 0;
  for (const Source& src : sources) {
    const float* data = src.data;
    if (copied(src)) {
      data = snapshot->data() + at;
      snapshot_copy(src.backend, snapshot->data() + at, src.data, src.piece->numel);
      at += static_cast<size_t>(src.piece->numel);
    }
    TS_RETURN_IF_ERROR(w.add(src.key, DType::f32, src.piece->param->global_shape, src.piece->global_offset,
                             src.piece->numel, data));
  }
  return Status::ok_status();
}

nlohmann::json training_state_json(const TrainingState& state, const nlohmann::json& run_config) {
  return {{"step", state.step},
          {"loader", {{"epoch", state.loader.epoch}, {"index", state.loader.index}}},
          {"adam_steps", state.adam_steps},
          {"run_config", run_config}};
}

Status save_training_checkpoint(Communicator& comm, const std::string& run_dir, const ModelConfig& cfg,
                                const std::vector<CheckpointChunk>& chunks, const TrainingState& state,
                                int keep_last, const nlohmann::json& run_config, ShardWriteFault write_fault,
                                checkpoint::BackgroundPruner* pruner) {
  // Every rank must agree on the staging directory name: use rank 0's tag.
  uint64_t tag = checkpoint::default_staging_tag();
  TS_RETURN_IF_ERROR(comm.broadcast(&tag, sizeof tag, DType::u8, 0));
  const auto target = checkpoint::checkpoint_target(run_dir, state.step, tag);
  checkpoint::CheckpointWriter w(target, comm.rank());
  // The writer reads host memory in place (the CPU backend's too); a device's buffers cross to the
  // host first, into `staging`, which outlives the write.
  bool on_device = false;
  for (const CheckpointChunk& c : chunks)
    on_device = on_device || (c.store && device_memory(c.store->backend())) || (c.opt && device_memory(c.opt->backend()));
  std::vector<float> staging;
  Status local = add_checkpoint_pieces(w, chunks, on_device ? &staging : nullptr);
  if (local.ok() && write_fault.at >= 0)
    w.limit_space(static_cast<int64_t>(write_fault.at * w.pending_bytes()), write_fault.kill);
  if (local.ok()) local = w.write_shard();
  TS_ASSIGN_OR_RETURN(std::vector<checkpoint::ShardRecord> records,
                      checkpoint::all_gather_records(comm, local, w.record()));
  if (comm.rank() == 0) {
    local = checkpoint::write_manifest(target, records, model_config_json(cfg), training_state_json(state, run_config));
    if (local.ok()) local = checkpoint::finalize(target);
    if (local.ok())
      local = pruner ? pruner->prune(run_dir, keep_last) : checkpoint::prune_checkpoints(run_dir, keep_last);
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
  const ParamLayout& layout = store.layout();
  std::vector<float> scratch;
  std::vector<float> host;  // one tensor (or its moments' range) read on the host, then crossed to the device
  for (const auto& p : layout.params()) {
    const std::vector<TensorPiece> pieces = layout.shard_pieces(p);
    int64_t covered = 0;
    for (const TensorPiece& q : pieces) covered += q.numel;
    TS_RETURN_IF_ERROR(reader.check_tensor("param/" + p.name, DType::f32, p.global_shape));
    host.resize(static_cast<size_t>(p.numel));
    float* w = host.data();
    if (covered < p.numel) std::fill(w, w + p.numel, 0.f);  // vocabulary padding rows
    TS_RETURN_IF_ERROR(read_pieces(reader, "param/" + p.name, pieces, 0, p.numel, w, scratch));
    store.copy_params_from_host(p.offset, p.numel, w);  // crosses to the device: the loaded tensor
    if (!opt) continue;
    // The moments of the part of this tensor inside the optimizer's range (all of it unless sharded).
    const int64_t lo = std::clamp(opt->begin() - p.offset, int64_t{0}, p.numel);
    const int64_t hi = std::clamp(opt->end() - p.offset, int64_t{0}, p.numel);
    if (hi <= lo) continue;
    for (auto [prefix, moment] : {std::pair<const char*, float*>{"adam_m/", opt->m()}, {"adam_v/", opt->v()}}) {
      float* dst = moment + (p.offset + lo - opt->begin());
      float* h = host.data();  // (hi - lo) elements
      if (covered < p.numel) std::fill(h, h + (hi - lo), 0.f);
      TS_RETURN_IF_ERROR(read_pieces(reader, prefix + p.name, pieces, lo, hi, h, scratch));
      // crosses to the device: the loaded moments (host moments: a plain copy)
      const size_t bytes = static_cast<size_t>(hi - lo) * sizeof(float);
      if (opt->backend()) opt->backend()->copy_to_device(dst, h, bytes);
      else std::copy_n(h, hi - lo, dst);
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
