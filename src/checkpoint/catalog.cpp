// Listing, choosing and pruning checkpoint directories (never touching anything not ours).
#include "checkpoint/catalog.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "checkpoint/file_io.h"
#include "core/file_util.h"
#include "checkpoint/format.h"
#include "core/log.h"

namespace tessera::checkpoint {
namespace fs = std::filesystem;
namespace {

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// "step_00000012.tmp-..." -> true: a save that has not (yet) been renamed into place.
bool is_staging_name(const std::string& name) {
  auto pos = name.find(".tmp-");
  int64_t step;
  return pos != std::string::npos && parse_step_dir_name(name.substr(0, pos), &step);
}

// "<prefix><digits><suffix>", e.g. shard_3.bin
bool is_numbered_name(const std::string& name, std::string_view prefix, std::string_view suffix) {
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix))
    return false;
  std::string_view digits(name.data() + prefix.size(), name.size() - prefix.size() - suffix.size());
  return std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// What a save writes: shards, the manifest, COMPLETE, and (asynchronous saves) per-rank records.
bool is_tessera_file_name(const std::string& name) {
  if (name == kManifestFile || name == kCompleteFile) return true;
  return is_numbered_name(name, "shard_", ".bin") || is_numbered_name(name, "record_", ".json") ||
         is_numbered_name(name, "record_", ".json.tmp");
}

bool has_tessera_manifest(const fs::path& dir) {
  auto text = read_file((dir / kManifestFile).string());
  if (!text.ok()) return false;
  auto j = nlohmann::json::parse(text.value(), nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("format") && j["format"] == kFormatName;
}

// Why a Tessera checkpoint directory may not be deleted; empty when it may.
std::string reason_not_to_delete(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (!e.is_regular_file() || !is_tessera_file_name(name)) return "it contains '" + name + "', which Tessera did not write";
  }
  if (ec) return "it cannot be listed (" + ec.message() + ")";
  return {};
}

}  // namespace

Status retire_checkpoint_dir(const fs::path& dir) {
  std::error_code ec;
  // COMPLETE first: from here on readers treat the directory as incomplete.
  fs::remove(dir / kCompleteFile, ec);
  if (ec) {
    return io_error("cannot delete old checkpoint '" + dir.string() + "': " + ec.message() +
                    "; check permissions, or delete it by hand");
  }
  (void)fsync_dir(dir.string());  // best effort: the marker's removal should reach disk first
  return {};
}

Status delete_retired_checkpoint_dir(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) files.push_back(e.path());
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return (a.filename() == kManifestFile) < (b.filename() == kManifestFile);  // manifest last
  });
  for (const auto& f : files) {
    if (ec) break;
    fs::remove(f, ec);
  }
  if (!ec) fs::remove(dir, ec);
  if (ec) {
    return io_error("cannot delete old checkpoint '" + dir.string() + "': " + ec.message() +
                    "; check permissions, or delete it by hand");
  }
  return {};
}

namespace {
Status delete_checkpoint_dir(const fs::path& dir) {
  TS_RETURN_IF_ERROR(retire_checkpoint_dir(dir));
  return delete_retired_checkpoint_dir(dir);
}

}  // namespace

Result<std::vector<CheckpointInfo>> list_complete_checkpoints(const std::string& run_dir, bool warn) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  std::vector<CheckpointInfo> out;
  std::error_code ec;
  if (!fs::exists(root, ec)) return out;
  fs::directory_iterator it(root, ec);
  if (ec) return io_error("cannot list '" + root.string() + "': " + ec.message() + "; check read permission");
  for (const auto& e : it) {
    if (!e.is_directory(ec)) continue;
    const std::string name = e.path().filename().string();
    int64_t step;
    if (parse_step_dir_name(name, &step)) {
      if (is_file(e.path() / kCompleteFile) && is_file(e.path() / kManifestFile)) {
        out.push_back(CheckpointInfo{e.path().string(), step});
      } else if (warn) {
        log_warn("ignoring incomplete checkpoint '" + e.path().string() +
                 "' (no COMPLETE marker or manifest): it was interrupted; delete it to silence this warning");
      }
    } else if (warn && is_staging_name(name)) {
      log_warn("ignoring unfinished checkpoint save '" + e.path().string() +
               "': a save was interrupted (or is still running); delete it once no save is running");
    }
  }
  std::sort(out.begin(), out.end(), [](const CheckpointInfo& a, const CheckpointInfo& b) { return a.step < b.step; });
  return out;
}

Result<CheckpointInfo> find_latest_complete(const std::string& run_dir) {
  TS_ASSIGN_OR_RETURN(auto all, list_complete_checkpoints(run_dir, /*warn=*/true));
  if (all.empty()) {
    return not_found("no complete checkpoint in '" + (fs::path(run_dir) / "checkpoints").string() +
                     "'; start a new run or point to the run directory that holds the checkpoints");
  }
  return all.back();
}

Result<std::vector<std::string>> retire_old_checkpoints(const std::string& run_dir, int keep_last) {
  if (keep_last < 1)
    return invalid_argument("prune_checkpoints: keep_last is " + std::to_string(keep_last) +
                            ", must be >= 1 (to keep every checkpoint, do not prune)");
  TS_ASSIGN_OR_RETURN(auto listed, list_complete_checkpoints(run_dir));
  // Directories that merely look like checkpoints (a foreign manifest) neither count towards K
  // nor get deleted.
  std::vector<CheckpointInfo> all;
  for (auto& c : listed) {
    if (has_tessera_manifest(c.path))
      all.push_back(std::move(c));
    else
      log_warn("'" + c.path + "' is not a Tessera checkpoint (its manifest.json is not ours); pruning leaves it alone");
  }
  std::vector<std::string> retired;
  for (size_t i = 0; i + keep_last < all.size(); ++i) {
    const fs::path dir = all[i].path;
    std::string why = reason_not_to_delete(dir);
    if (!why.empty()) {
      log_warn("not deleting old checkpoint '" + dir.string() + "': " + why + "; move it out of the way or delete it by hand");
      continue;
    }
    TS_RETURN_IF_ERROR(retire_checkpoint_dir(dir));
    retired.push_back(dir.string());
  }
  return retired;
}

Status prune_checkpoints(const std::string& run_dir, int keep_last) {
  TS_ASSIGN_OR_RETURN(std::vector<std::string> retired, retire_old_checkpoints(run_dir, keep_last));
  for (const std::string& dir : retired) {
    TS_RETURN_IF_ERROR(delete_retired_checkpoint_dir(dir));
    log_info("deleted old checkpoint '" + dir + "' (keeping the last " + std::to_string(keep_last) + ")");
  }
  return {};
}

Result<std::vector<std::string>> remove_stale_staging(const std::string& run_dir) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  std::vector<std::string> removed;
  std::error_code ec;
  if (!fs::exists(root, ec)) return removed;
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory() && is_staging_name(e.path().filename().string())) stale.push_back(e.path());
  if (ec) return io_error("cannot list '" + root.string() + "': " + ec.message() + "; check read permission");
  for (const fs::path& dir : stale) {
    const std::string why = reason_not_to_delete(dir);
    if (!why.empty()) {
      log_warn("not removing unfinished checkpoint save '" + dir.string() + "': " + why);
      continue;
    }
    TS_RETURN_IF_ERROR(delete_checkpoint_dir(dir));
    removed.push_back(dir.string());
  }
  return removed;
}

Result<std::string> set_aside_checkpoint(const std::string& path) {
  std::string target = path + ".corrupt";
  std::error_code ec;
  for (int k = 2; fs::exists(target, ec); ++k) target = path + ".corrupt-" + std::to_string(k);
  TS_RETURN_IF_ERROR(rename_no_replace(path, target));
  return target;
}

}  // namespace tessera::checkpoint
