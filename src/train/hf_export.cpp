// Writing a Hugging Face model directory: in memory first, then a staging directory, then moved in.
#include "train/hf_export.h"

#include <unistd.h>

#include <filesystem>
#include <map>

#include "core/file_util.h"
#include "data/hf_tokenizer.h"
#include "data/manifest.h"
#include "model/hf_config.h"
#include "model/hf_directory.h"
#include "model/hf_weights.h"

namespace tessera {

namespace fs = std::filesystem;

namespace {

std::string squote(const std::string& s) { return "'" + s + "'"; }

// The tokenizer files of the run's (or the given) dataset; no dataset is a note, not an error:
// the weights are useful without it.
Result<HfTokenizerFiles> tokenizer_files(const LoadedModel& lm, const HfExportOptions& opt) {
  const std::string data = opt.tokenizer_data.empty() ? lm.data_dir : opt.tokenizer_data;
  HfTokenizerFiles none;
  if (data.empty()) {
    none.note = "tokenizer: none written: the model records no dataset; pass --data <prepared dataset>";
    return none;
  }
  auto m = load_manifest(data);
  if (!m.ok()) {
    if (!opt.tokenizer_data.empty()) return m.status();  // asked for explicitly: a mistake to report
    none.note = "tokenizer: none written: the run's dataset " + data + " cannot be read (" + m.status().message() +
                "); pass --data <prepared dataset>";
    return none;
  }
  if (m->vocab_size > lm.config.vocab_size)
    return invalid_argument("the tokenizer of dataset " + data + " has " + std::to_string(m->vocab_size) +
                            " tokens but the model only " + std::to_string(lm.config.vocab_size) +
                            ": pass --data with the dataset the model was trained on");
  return hf_tokenizer_files(m.value(), lm.config.max_seq_len);
}

// Every name an export may write: a forced export removes the ones it does not write this time.
std::vector<std::string> export_file_names() {
  std::vector<std::string> n = {kHfConfigFile, kHfGenerationConfigFile, kHfWeightsFile};
  for (const auto& t : hf_tokenizer_file_names()) n.push_back(t);
  return n;
}

Status check_target(const std::string& dir, bool force, bool* exists_nonempty) {
  std::error_code ec;
  *exists_nonempty = false;
  if (!fs::exists(dir, ec)) return Status::ok_status();
  if (!fs::is_directory(dir, ec))
    return invalid_argument("--hf " + squote(dir) + " exists and is not a directory; choose a directory path");
  if (fs::is_empty(dir, ec)) return Status::ok_status();
  *exists_nonempty = true;
  if (!force)
    return invalid_argument("--hf " + squote(dir) +
                            " exists and is not empty; pass --force to replace the exported files in it (other "
                            "files are kept), or choose a new directory");
  return Status::ok_status();
}

// Moves the staged files into an existing DIR one rename at a time (each file is old or new, never
// half), after removing the export's files this export does not write.
Status move_into(const fs::path& staging, const fs::path& dir, const std::map<std::string, std::string>& staged) {
  std::error_code ec;
  for (const auto& name : export_file_names())
    if (!staged.count(name) && fs::exists(dir / name, ec) && !fs::remove(dir / name, ec))
      return io_error("cannot remove the stale " + (dir / name).string() + ": " + ec.message());
  for (const auto& [name, unused] : staged) {
    fs::rename(staging / name, dir / name, ec);
    if (ec) return io_error("cannot move " + (staging / name).string() + " to " + dir.string() + ": " + ec.message());
  }
  fs::remove_all(staging, ec);
  return fsync_dir(dir.string());
}

}  // namespace

Result<HfExportReport> export_hf_directory(const std::string& dir, const LoadedModel& lm, const HfExportOptions& opt) {
  const ModelConfig& cfg = lm.config;
  bool nonempty = false;
  TS_RETURN_IF_ERROR(check_target(dir, opt.force, &nonempty));

  // Everything in memory first: any refusal happens before a file is touched.
  TS_ASSIGN_OR_RETURN(HfTokenizerFiles tok, tokenizer_files(lm, opt));
  HfSpecialTokens special{tok.bos, tok.eos, std::nullopt};
  TS_ASSIGN_OR_RETURN(nlohmann::json config, hf_config_json(cfg, special));
  std::map<std::string, std::string> files = tok.files;  // name -> bytes (weights written separately)
  files[kHfConfigFile] = config.dump(2) + "\n";
  files[kHfGenerationConfigFile] = hf_generation_config_json(special).dump(2) + "\n";

  const fs::path target = fs::absolute(dir).lexically_normal();
  const fs::path parent = target.parent_path();
  std::error_code ec;
  if (!fs::is_directory(parent, ec))
    return not_found("--hf " + squote(dir) + ": its parent directory " + parent.string() + " does not exist; create it first");
  const fs::path staging = parent / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()));
  fs::remove_all(staging, ec);
  if (!fs::create_directory(staging, ec))
    return io_error("cannot create the staging directory " + staging.string() + ": " + ec.message());
  // Any failure from here removes the staging directory and leaves DIR as it was.
  auto abandon = [&](Status s) {
    std::error_code e;
    fs::remove_all(staging, e);
    return s;
  };
  for (const auto& [name, bytes] : files) {
    Status s = write_file_atomic((staging / name).string(), bytes);
    if (!s.ok()) return abandon(s);
  }
  Status w = export_hf_weights((staging / kHfWeightsFile).string(), cfg, lm.store->layout(), lm.store->params(),
                               HfGpt2Names::lm_head_model);
  if (!w.ok()) return abandon(w);
  files[kHfWeightsFile] = "";

  if (nonempty) {
    Status s = move_into(staging, target, files);
    if (!s.ok()) return abandon(s);
  } else {
    if (fs::exists(target, ec)) fs::remove(target, ec);  // empty: checked above
    fs::rename(staging, target, ec);
    if (ec) return abandon(io_error("cannot move " + staging.string() + " to " + target.string() + ": " + ec.message()));
    (void)fsync_dir(parent.string());  // best effort: the directory is complete and in place
  }
  HfExportReport report;
  for (const auto& [name, unused] : files) report.files.push_back(name);
  report.notes.push_back(tok.note);
  return report;
}

}  // namespace tessera
