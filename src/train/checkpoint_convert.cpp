// Consolidating a (possibly multi-rank) checkpoint into safetensors + state.json, and back into a
// one-rank checkpoint written exactly as a one-rank training run writes it.
#include "train/checkpoint_convert.h"

#include <filesystem>
#include <optional>
#include <set>

#include "checkpoint/format.h"
#include "checkpoint/reader.h"
#include "checkpoint/writer.h"
#include "core/file_util.h"
#include "model/config_json.h"
#include "model/hf_weights.h"
#include "model/safetensors.h"
#include "train/train_checkpoint.h"

namespace tessera {
namespace fs = std::filesystem;
namespace {

constexpr int kConsolidatedVersion = 1;
constexpr const char* kMoments[] = {"adam_m/", "adam_v/"};
// state.json keys that are not part of the checkpoint's training state.
const std::set<std::string> kReservedStateKeys = {"format", "version", "model_config", "source"};

std::string quote(const std::string& s) { return "'" + s + "'"; }

Status refuse_existing_files(const std::string& out_dir) {
  for (const char* f : {kConsolidatedModelFile, kConsolidatedOptimizerFile, kConsolidatedExtraFile,
                        kConsolidatedStateFile}) {
    std::error_code ec;
    if (fs::exists(fs::path(out_dir) / f, ec))
      return invalid_argument("convert: " + quote((fs::path(out_dir) / f).string()) +
                              " already exists and is never overwritten; choose another --out directory");
  }
  return Status::ok_status();
}

// Checks that the checkpoint holds every parameter and moment of the model with its global shape
// -- before anything is allocated, so a manifest cannot make us allocate what its files lack -- and
// returns the other tensors it holds (e.g. local SGD state), which must be f32 to be carried over.
Result<std::vector<const checkpoint::TensorEntry*>> check_checkpoint_tensors(const checkpoint::CheckpointReader& reader,
                                                                              const ParamLayout& layout) {
  std::set<std::string> model;
  for (const ParamInfo& p : layout.params()) {
    for (const char* prefix : {"param/", kMoments[0], kMoments[1]}) {
      TS_RETURN_IF_ERROR(reader.check_tensor(prefix + p.name, DType::f32, p.global_shape));
      model.insert(prefix + p.name);
    }
  }
  std::vector<const checkpoint::TensorEntry*> extra;
  for (const auto& e : reader.tensors()) {
    if (model.count(e.key)) continue;
    if (e.dtype != DType::f32)
      return invalid_argument("convert: checkpoint " + quote(reader.path()) + " holds tensor " + quote(e.key) +
                              " as " + std::string(dtype_name(e.dtype)) + "; only f32 tensors convert");
    extra.push_back(&e);
  }
  return extra;
}

// A whole f32 tensor of the checkpoint, by key, with its global shape.
Result<NamedTensor> read_whole(const checkpoint::CheckpointReader& reader, const std::string& key) {
  const checkpoint::TensorEntry* e = reader.find(key);
  if (!e) return not_found("convert: checkpoint " + quote(reader.path()) + " has no tensor " + quote(key));
  NamedTensor t{key, e->global_shape, std::vector<float>(static_cast<size_t>(shape_numel(e->global_shape)))};
  TS_RETURN_IF_ERROR(reader.read_f32(key, 0, static_cast<int64_t>(t.data.size()), t.data.data()));
  return t;
}

Result<nlohmann::json> read_state_json(const std::string& dir) {
  const std::string path = (fs::path(dir) / kConsolidatedStateFile).string();
  TS_ASSIGN_OR_RETURN(std::string text, read_file(path));
  TS_ASSIGN_OR_RETURN(nlohmann::json j, checkpoint::parse_json_limited(text, path));
  auto bad = [&](const std::string& what) {
    return corrupt_data(quote(path) + ": " + what + "; write the directory with `tessera checkpoint convert " +
                        "<checkpoint> --out <dir>`");
  };
  if (!j.is_object()) return bad("not a JSON object");
  if (j.value("format", "") != kConsolidatedFormat) return bad("'format' is not '" + std::string(kConsolidatedFormat) + "'");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() < 1)
    return bad("'version' must be a positive integer");
  if (j["version"].get<int64_t>() > kConsolidatedVersion)
    return invalid_argument(quote(path) + " is format version " + std::to_string(j["version"].get<int64_t>()) +
                            ", newer than this build reads (" + std::to_string(kConsolidatedVersion) +
                            "); convert it with a newer Tessera");
  if (!j.contains("step") || !j["step"].is_number_integer() || j["step"].get<int64_t>() < 0)
    return bad("'step' must be an integer >= 0");
  if (!j.contains("model_config") || !j["model_config"].is_object()) return bad("'model_config' must be an object");
  return j;
}

// The moments of every parameter, read from optimizer.safetensors into two flat buffers (layout
// offsets). The file must hold exactly these tensors, with the model's shapes.
Status read_moments(const std::string& path, const ParamLayout& layout, std::vector<float>* m,
                    std::vector<float>* v) {
  TS_ASSIGN_OR_RETURN(SafetensorsFile file, open_safetensors(path));
  std::set<std::string> expected;
  for (const ParamInfo& p : layout.params()) {
    for (auto [prefix, dst] : {std::pair<const char*, std::vector<float>*>{kMoments[0], m}, {kMoments[1], v}}) {
      const std::string name = prefix + p.name;
      expected.insert(name);
      TS_ASSIGN_OR_RETURN(StTensorInfo info, file.info(name));
      if (info.shape != p.global_shape)
        return invalid_argument(quote(path) + ": tensor " + quote(name) + " has shape " +
                                shape_to_string(info.shape) + ", the model's " + quote(p.name) + " is " +
                                shape_to_string(p.global_shape) + "; state.json and the file are from different models");
      TS_RETURN_IF_ERROR(file.read_f32_into(name, dst->data() + p.offset, p.numel));
    }
  }
  for (const std::string& name : file.names())
    if (!expected.count(name))
      return invalid_argument(quote(path) + " holds tensor " + quote(name) +
                              ", which is not an AdamW moment of the model in state.json; remove it");
  return Status::ok_status();
}

}  // namespace

bool is_consolidated_dir(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / kConsolidatedStateFile, ec);
}

Result<ConvertSummary> export_consolidated(const std::string& checkpoint_dir, const std::string& out_dir) {
  TS_ASSIGN_OR_RETURN(checkpoint::CheckpointReader reader, checkpoint::open_checkpoint(checkpoint_dir));
  auto cfg = model_config_from_json(reader.config());
  if (!cfg.ok())
    return invalid_argument("convert: checkpoint " + quote(checkpoint_dir) + " has no valid model config (" +
                            cfg.status().message() + "); only checkpoints of `tessera train` can be converted");
  for (const std::string& key : kReservedStateKeys)
    if (reader.state().contains(key))
      return invalid_argument("convert: the training state of " + quote(checkpoint_dir) + " has a field " +
                              quote(key) + ", which state.json reserves; use the Tessera version that wrote it");
  const ParamLayout layout(cfg.value());  // one rank: every tensor whole (tp 1 pads nothing)
  TS_ASSIGN_OR_RETURN(std::vector<const checkpoint::TensorEntry*> extra, check_checkpoint_tensors(reader, layout));
  TS_RETURN_IF_ERROR(refuse_existing_files(out_dir));

  // Everything is read (and its checksums verified) before anything is written: a damaged
  // checkpoint leaves no half-written output behind.
  std::vector<float> params(static_cast<size_t>(layout.total_numel()), 0.f);
  for (const ParamInfo& p : layout.params())
    TS_RETURN_IF_ERROR(reader.read_f32("param/" + p.name, 0, p.numel, params.data() + p.offset));
  std::vector<NamedTensor> moments, others;
  for (const char* prefix : kMoments)
    for (const ParamInfo& p : layout.params()) {
      TS_ASSIGN_OR_RETURN(NamedTensor t, read_whole(reader, prefix + p.name));
      moments.push_back(std::move(t));
    }
  ConvertSummary sum{checkpoint_dir, out_dir, reader.step(), reader.world_size(),
                     static_cast<int64_t>(layout.params().size()),
                     3 * layout.total_numel() * static_cast<int64_t>(sizeof(float))};
  for (const checkpoint::TensorEntry* e : extra) {
    TS_ASSIGN_OR_RETURN(NamedTensor t, read_whole(reader, e->key));
    sum.bytes += static_cast<int64_t>(t.data.size() * sizeof(float));
    others.push_back(std::move(t));
  }

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return io_error("convert: cannot create " + quote(out_dir) + ": " + ec.message());
  const fs::path out(out_dir);
  TS_RETURN_IF_ERROR(export_hf_weights((out / kConsolidatedModelFile).string(), cfg.value(), layout, params.data()));
  TS_RETURN_IF_ERROR(write_safetensors((out / kConsolidatedOptimizerFile).string(), moments,
                                       {{"format", "pt"}, {"tessera.content", "adamw moments"},
                                        {"tessera.step", std::to_string(reader.step())}}));
  if (!others.empty())
    TS_RETURN_IF_ERROR(write_safetensors((out / kConsolidatedExtraFile).string(), others,
                                         {{"format", "pt"}, {"tessera.content", "other checkpoint tensors"}}));
  nlohmann::json state = reader.state();
  state["format"] = kConsolidatedFormat;
  state["version"] = kConsolidatedVersion;
  state["step"] = reader.step();  // the checkpoint's own step (the manifest's; the state's agrees)
  state["model_config"] = reader.config();
  state["source"] = {{"checkpoint", checkpoint_dir}, {"ranks", reader.world_size()}};
  TS_RETURN_IF_ERROR(write_file_atomic((out / kConsolidatedStateFile).string(), state.dump(2) + "\n"));
  return sum;
}

Result<ConvertSummary> import_consolidated(const std::string& dir, const std::string& run_dir) {
  TS_ASSIGN_OR_RETURN(nlohmann::json j, read_state_json(dir));
  const int64_t step = j["step"].get<int64_t>();
  const auto target = checkpoint::checkpoint_target(run_dir, step);
  std::error_code ec;
  if (fs::exists(target.final_dir(), ec))
    return invalid_argument("convert: checkpoint " + quote(target.final_dir()) +
                            " already exists and is never overwritten; choose another --out run directory");
  auto cfg = model_config_from_json(j["model_config"]);
  if (!cfg.ok())
    return invalid_argument(quote((fs::path(dir) / kConsolidatedStateFile).string()) + ": bad 'model_config' (" +
                            cfg.status().message() + ")");
  const ParamLayout layout(cfg.value());
  const size_t n = static_cast<size_t>(layout.total_numel());
  // Parameters and moments in one-rank flat buffers, so the trainer's own piece list applies.
  std::vector<float> params(n, 0.f), m(n, 0.f), v(n, 0.f);
  TS_RETURN_IF_ERROR(
      import_hf_weights((fs::path(dir) / kConsolidatedModelFile).string(), cfg.value(), layout, params.data()));
  TS_RETURN_IF_ERROR(read_moments((fs::path(dir) / kConsolidatedOptimizerFile).string(), layout, &m, &v));

  checkpoint::CheckpointWriter w(target, 0);
  std::set<std::string> names;
  std::vector<std::vector<float>> extra_data;  // must outlive write_shard
  for (const SavedPiece& s : checkpoint_pieces(layout, FlatRange{0, layout.total_numel()})) {
    for (auto [prefix, base] : {std::pair<const char*, const float*>{"param/", params.data()},
                                {kMoments[0], m.data()}, {kMoments[1], v.data()}}) {
      names.insert(prefix + s.param->name);
      TS_RETURN_IF_ERROR(w.add(prefix + s.param->name, DType::f32, s.param->global_shape, s.global_offset, s.numel,
                               base + s.flat_offset));
    }
  }
  // Other tensors (written by export only when the checkpoint had any), whole, after the model's.
  std::optional<SafetensorsFile> extra;
  const std::string extra_path = (fs::path(dir) / kConsolidatedExtraFile).string();
  if (fs::exists(extra_path, ec)) {
    TS_ASSIGN_OR_RETURN(extra, open_safetensors(extra_path));
    extra_data.resize(extra->names().size());
    for (size_t i = 0; i < extra->names().size(); ++i) {
      const std::string& name = extra->names()[i];
      if (!names.insert(name).second)
        return invalid_argument(quote(extra_path) + ": tensor " + quote(name) + " is also a model tensor; remove it");
      TS_ASSIGN_OR_RETURN(extra_data[i], extra->read_f32(name));
      const StTensorInfo& info = *extra->find(name);
      TS_RETURN_IF_ERROR(w.add(name, DType::f32, info.shape, 0, info.numel(), extra_data[i].data()));
    }
  }
  TS_RETURN_IF_ERROR(w.write_shard());
  nlohmann::json state = j;
  for (const std::string& key : kReservedStateKeys) state.erase(key);
  TS_RETURN_IF_ERROR(checkpoint::write_manifest(target, {w.record()}, j["model_config"], state));
  TS_RETURN_IF_ERROR(checkpoint::finalize(target));
  return ConvertSummary{dir, target.final_dir(), step, 1, static_cast<int64_t>(layout.params().size()),
                        3 * layout.total_numel() * static_cast<int64_t>(sizeof(float))};
}

}  // namespace tessera
