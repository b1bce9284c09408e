// Checkpoint loading: up-front validation of the directory, range reads assembled from pieces
// with checksum verification, and the config compatibility check.
#include "checkpoint/reader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "checkpoint/file_io.h"
#include "core/file_util.h"

namespace tessera::checkpoint {
namespace fs = std::filesystem;
namespace {

constexpr const char* kUseAnother =
    "; the checkpoint is damaged: resume from an earlier checkpoint (or restore this one from a backup)";

void diff_into(const nlohmann::json& a, const nlohmann::json& b, const std::string& prefix,
               std::vector<std::string>* out) {
  if (a.is_object() && b.is_object()) {
    std::set<std::string> keys;
    for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
    for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
    for (const auto& k : keys) {
      const std::string name = prefix.empty() ? k : prefix + "." + k;
      if (!a.contains(k))
        out->push_back(name + " (absent) vs " + b[k].dump());
      else if (!b.contains(k))
        out->push_back(name + " " + a[k].dump() + " vs (absent)");
      else
        diff_into(a[k], b[k], name, out);
    }
    return;
  }
  if (a != b) out->push_back((prefix.empty() ? std::string("config") : prefix) + " " + a.dump() + " vs " + b.dump());
}

}  // namespace

std::vector<std::string> config_differences(const nlohmann::json& saved, const nlohmann::json& expected) {
  std::vector<std::string> out;
  diff_into(saved, expected, "", &out);
  return out;
}

Result<Manifest> read_manifest(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    return not_found("checkpoint directory '" + path +
                     "' does not exist; pass a checkpoints/step_<N> directory (find_latest_complete finds the newest)");
  }
  const fs::path dir(path);
  if (!fs::is_regular_file(dir / kCompleteFile, ec)) {
    return corrupt_data("checkpoint '" + path +
                        "' is incomplete (no COMPLETE marker): its save was interrupted; resume from an earlier "
                        "checkpoint (find_latest_complete skips incomplete ones) or delete this directory");
  }
  const std::string manifest_path = (dir / kManifestFile).string();
  auto text = read_file(manifest_path);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::not_found)
      return not_found("checkpoint '" + path + "' has no " + std::string(kManifestFile) + kUseAnother);
    return text.status();
  }
  auto j = parse_json_limited(text.value(), manifest_path);
  if (!j.ok()) return corrupt_data(j.status().message() + kUseAnother);
  TS_ASSIGN_OR_RETURN(Manifest m, manifest_from_json(j.value(), manifest_path));
  int64_t dir_step;
  if (parse_step_dir_name(dir.filename().string(), &dir_step) && dir_step != m.step) {
    return corrupt_data("'" + manifest_path + "' is for step " + std::to_string(m.step) +
                        " but its directory is named for step " + std::to_string(dir_step) +
                        "; directories must not be renamed or mixed up, restore the original checkpoint");
  }
  return m;
}

Result<CheckpointReader> open_checkpoint(const std::string& path) {
  CheckpointReader reader;
  reader.path_ = path;
  TS_ASSIGN_OR_RETURN(reader.manifest_, read_manifest(path));
  for (size_t i = 0; i < reader.manifest_.tensors.size(); ++i) reader.index_[reader.manifest_.tensors[i].key] = i;
  const fs::path dir(path);
  for (const ShardRecord& s : reader.manifest_.shards) {
    const std::string file = (dir / s.file).string();
    // A FIFO or device under a shard's name would block or stream forever: only plain files.
    std::error_code ec;
    if (fs::exists(fs::symlink_status(file, ec)) && !fs::is_regular_file(file, ec))
      return corrupt_data("'" + file + "' is not a regular file" + kUseAnother);
    auto f = ReadOnlyFile::open(file);
    if (!f.ok()) {
      if (f.status().code() == StatusCode::not_found)
        return not_found("checkpoint '" + path + "' is missing the shard of rank " + std::to_string(s.rank) + ": '" +
                         file + "'" + kUseAnother);
      return f.status();
    }
    if (f->size() != s.bytes) {
      return corrupt_data("'" + file + "' has " + std::to_string(f->size()) + " bytes, the manifest says " +
                          std::to_string(s.bytes) + (f->size() < s.bytes ? " (truncated)" : " (extra data)") +
                          kUseAnother);
    }
  }
  return reader;
}

const TensorEntry* CheckpointReader::find(std::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &manifest_.tensors[it->second];
}

Status CheckpointReader::read(std::string_view key, int64_t global_offset, int64_t numel, void* dst) const {
  const TensorEntry* e = find(key);
  if (!e) {
    return not_found("checkpoint '" + path_ + "' has no tensor '" + std::string(key) +
                     "'; the model being loaded differs from the saved one: use a matching config");
  }
  const int64_t total = shape_numel(e->global_shape);  // validated when the manifest was read
  if (global_offset < 0 || numel < 0 || global_offset > total || numel > total - global_offset) {
    return invalid_argument("read of tensor '" + e->key + "': range [" + std::to_string(global_offset) + ", +" +
                            std::to_string(numel) + ") is outside its " + std::to_string(total) + " elements");
  }
  const int64_t end = global_offset + numel;
  const size_t esize = dtype_size(e->dtype);
  // First piece that ends after global_offset; pieces are sorted and cover the tensor exactly once.
  auto it = std::partition_point(e->pieces.begin(), e->pieces.end(), [&](const TensorPiece& p) {
    return p.global_offset + p.numel <= global_offset;
  });
  std::map<std::string, ReadOnlyFile> files;
  std::vector<char> scratch;
  for (; it != e->pieces.end() && it->global_offset < end; ++it) {
    const TensorPiece& p = *it;
    auto fit = files.find(p.file);
    if (fit == files.end()) {
      TS_ASSIGN_OR_RETURN(ReadOnlyFile f, ReadOnlyFile::open((fs::path(path_) / p.file).string()));
      fit = files.emplace(p.file, std::move(f)).first;
    }
    const int64_t lo = std::max(global_offset, p.global_offset);
    const int64_t hi = std::min(end, p.global_offset + p.numel);
    char* out = static_cast<char*>(dst) + (lo - global_offset) * esize;
    const size_t piece_bytes = static_cast<size_t>(p.numel) * esize;
    // Read the whole piece, since only the whole piece has a checksum; straight into dst when
    // the request covers it (the common case when the layout did not change).
    const bool whole = lo == p.global_offset && hi == p.global_offset + p.numel;
    char* buf = out;
    if (!whole) {
      scratch.resize(piece_bytes);
      buf = scratch.data();
    }
    TS_RETURN_IF_ERROR(fit->second.read_at(p.offset_in_file, piece_bytes, buf));
    if (checksum_bytes(buf, piece_bytes) != p.checksum) {
      return corrupt_data("checksum mismatch in '" + (fs::path(path_) / p.file).string() + "' (rank " +
                          std::to_string(p.rank) + ") for tensor '" + e->key + "', elements [" +
                          std::to_string(p.global_offset) + ", " + std::to_string(p.global_offset + p.numel) + ")" +
                          kUseAnother);
    }
    if (!whole) std::memcpy(out, buf + (lo - p.global_offset) * esize, static_cast<size_t>(hi - lo) * esize);
  }
  return {};
}

Status CheckpointReader::read_f32(std::string_view key, int64_t global_offset, int64_t numel, float* dst) const {
  const TensorEntry* e = find(key);
  if (e && e->dtype != DType::f32) {
    return invalid_argument("tensor '" + e->key + "' in checkpoint '" + path_ + "' is " +
                            std::string(dtype_name(e->dtype)) + ", not f32; read it with read() and convert");
  }
  return read(key, global_offset, numel, dst);
}

Status CheckpointReader::check_tensor(std::string_view key, DType dtype,
                                      const std::vector<int64_t>& global_shape) const {
  const TensorEntry* e = find(key);
  if (!e) {
    return not_found("checkpoint '" + path_ + "' has no tensor '" + std::string(key) +
                     "'; the model being loaded differs from the saved one: use a matching config");
  }
  if (e->dtype == dtype && e->global_shape == global_shape) return {};
  auto shape = [](const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) {
      if (i) out += ',';
      out += std::to_string(s[i]);
    }
    return out + "]";
  };
  return invalid_argument("tensor '" + e->key + "' in checkpoint '" + path_ + "' is " +
                          std::string(dtype_name(e->dtype)) + " " + shape(e->global_shape) + " but the model expects " +
                          std::string(dtype_name(dtype)) + " " + shape(global_shape) +
                          "; use the config the checkpoint was saved with");
}

Status CheckpointReader::check_compatible(const nlohmann::json& expected_config) const {
  if (!expected_config.is_object()) return invalid_argument("check_compatible: expected config must be a JSON object");
  auto diffs = config_differences(manifest_.config, expected_config);
  if (diffs.empty()) return {};
  std::string list;
  for (size_t i = 0; i < diffs.size(); ++i) {
    if (i) list += ", ";
    list += diffs[i];
  }
  return invalid_argument("checkpoint '" + path_ + "' is for a different model: " + list +
                          " (checkpoint vs expected); use a matching config or start a new run");
}

}  // namespace tessera::checkpoint
