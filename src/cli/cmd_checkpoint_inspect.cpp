// tessera checkpoint inspect: what a checkpoint holds (step, saving layout, model, tensors) and a
// verification of every piece's checksum; text for people, --json for scripts.
#include "cli/cmd_checkpoint_inspect.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "checkpoint/catalog.h"
#include "checkpoint/fingerprint.h"
#include "checkpoint/inspect.h"
#include "checkpoint/reader.h"
#include "cli/commands.h"

namespace tessera::cli {
namespace fs = std::filesystem;
using nlohmann::json;
namespace {

// Progress lines only where verification takes noticeable time.
constexpr int64_t kProgressMinBytes = int64_t{256} << 20;

std::string human_bytes(int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// "key=value ..." of a flat JSON object, `first` keys first (in that order), then the rest.
std::string key_values(const json& obj, std::initializer_list<const char*> first = {}) {
  std::string out;
  auto add = [&](const std::string& k, const json& v) {
    out += (out.empty() ? "" : " ") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  };
  for (const char* k : first)
    if (obj.contains(k)) add(k, obj[k]);
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool listed = false;
    for (const char* k : first) listed = listed || it.key() == k;
    if (!listed) add(it.key(), it.value());
  }
  return out;
}

// state.run_config.parallel, or null when the state does not carry it.
json saved_layout(const json& state) {
  const json* rc = state.contains("run_config") ? &state["run_config"] : nullptr;
  if (rc && rc->is_object() && rc->contains("parallel") && (*rc)["parallel"].is_object()) return (*rc)["parallel"];
  return nullptr;
}

json damage_json(const checkpoint::Damage& d) {
  json j = {{"file", d.file}, {"rank", d.rank}, {"what", d.what}};
  if (!d.key.empty()) {
    j["key"] = d.key;
    j["elements"] = {d.begin, d.end};
  }
  return j;
}

std::string damage_text(const checkpoint::Damage& d) {
  std::string s = "'" + d.file + "'" + (d.rank >= 0 ? " (rank " + std::to_string(d.rank) + ")" : "");
  if (!d.key.empty())
    s += ": tensor '" + d.key + "' elements [" + std::to_string(d.begin) + ", " + std::to_string(d.end) + ")";
  return s + ": " + d.what;
}

int report_error(const InspectOptions& o, const std::string& dir, const std::string& message,
                 const std::string& fix) {
  if (o.json)
    std::printf("%s\n", json({{"checkpoint", dir}, {"ok", false}, {"error", message}, {"fix", fix}}).dump(1).c_str());
  return fail(message + "\nfix: " + fix);
}

void print_summary(const CheckpointArg& arg, const checkpoint::Manifest& m) {
  std::printf("checkpoint %s%s\n", arg.dir.c_str(),
              arg.run.empty() ? "" : (" (the latest complete checkpoint of run " + arg.run + ")").c_str());
  std::string shards;
  for (const auto& s : m.shards) shards += (shards.empty() ? "" : ", ") + s.file + " " + human_bytes(s.bytes);
  std::printf("step %lld, saved by %d rank%s: %s\n", (long long)m.step, m.world_size, m.world_size == 1 ? "" : "s",
              shards.c_str());
  const json layout = saved_layout(m.state);
  std::printf("layout: %s\n", layout.is_null() ? "unknown (the state has no run_config.parallel)"
                                               : key_values(layout, {"dp", "tp", "pp", "zero"}).c_str());
  std::printf("model: %s\n", key_values(m.config, {"arch"}).c_str());
  json st = m.state;
  st.erase("run_config");
  std::printf("state: %s\n", key_values(st, {"step"}).c_str());
  std::printf("%-40s %-5s %-16s %6s %12s  %s\n", "tensor", "dtype", "global shape", "pieces", "bytes", "fingerprint");
  for (const auto& e : m.tensors) {
    const int64_t bytes = checkpoint::shape_numel(e.global_shape) * static_cast<int64_t>(dtype_size(e.dtype));
    std::printf("%-40s %-5s %-16s %6zu %12lld  %s\n", e.key.c_str(), std::string(dtype_name(e.dtype)).c_str(),
                shape_text(e.global_shape).c_str(), e.pieces.size(), (long long)bytes,
                e.fingerprint ? checkpoint::fingerprint_hex(*e.fingerprint).c_str() : "none");
  }
}

}  // namespace

Result<CheckpointArg> resolve_checkpoint_arg(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    return not_found("'" + path + "' is not a directory: pass a run directory (train.out_dir) or one of its "
                     "checkpoints/step_<N> directories");
  const fs::path p(path);
  // A dataset directory also holds a manifest.json: only COMPLETE or the step_<N> name say "checkpoint".
  int64_t step;
  if (fs::exists(p / checkpoint::kCompleteFile, ec) ||
      checkpoint::parse_step_dir_name(p.lexically_normal().filename().string(), &step))
    return CheckpointArg{path, ""};
  if (!fs::is_directory(p / "checkpoints", ec))
    return not_found("'" + path + "' holds no checkpoint: it is neither a run directory (with checkpoints/) nor a "
                     "checkpoint directory (checkpoints/step_<N> with manifest.json and COMPLETE)");
  auto latest = checkpoint::find_latest_complete(path);
  if (!latest.ok())
    return not_found("run '" + path + "' has no complete checkpoint (" + latest.status().message() +
                     "); pass one of its checkpoints/step_<N> directories");
  return CheckpointArg{latest->path, path};
}

int run_checkpoint_inspect(const InspectOptions& o) {
  auto arg = resolve_checkpoint_arg(o.path);
  if (!arg.ok()) return report_error(o, o.path, arg.status().message(), "check the path");
  auto m = checkpoint::read_manifest(arg->dir);
  if (!m.ok()) return report_error(o, arg->dir, m.status().message(), checkpoint::recovery_advice(arg->dir));
  if (!o.json) {
    print_summary(*arg, *m);
    std::fflush(stdout);
  }

  const auto t0 = std::chrono::steady_clock::now();
  auto last = t0;
  checkpoint::VerifyProgress progress;
  if (!o.quiet)
    progress = [&](int64_t done, int64_t total) {
      const auto now = std::chrono::steady_clock::now();
      if (total < kProgressMinBytes || (now - last < std::chrono::seconds(1) && done < total)) return;
      last = now;
      std::fprintf(stderr, "verifying: %s of %s (%.0f%%)\n", human_bytes(done).c_str(), human_bytes(total).c_str(),
                   100.0 * static_cast<double>(done) / static_cast<double>(total));
    };
  const checkpoint::VerifyReport r = checkpoint::verify_checkpoint(arg->dir, *m, progress);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  int64_t params = 0, tensor_bytes = 0, pieces = 0;
  for (const auto& e : m->tensors) {
    const int64_t n = checkpoint::shape_numel(e.global_shape);
    tensor_bytes += n * static_cast<int64_t>(dtype_size(e.dtype));
    pieces += static_cast<int64_t>(e.pieces.size());
    if (e.key.rfind("param/", 0) == 0) params += n;
  }
  const std::string fix = r.ok() ? "" : checkpoint::recovery_advice(arg->dir);
  std::string error;
  if (!r.ok()) {
    error = "checkpoint '" + arg->dir + "' is damaged: " + std::to_string(r.damaged_pieces) + " of " +
            std::to_string(r.pieces) + " pieces failed verification";
    if (r.fingerprint_mismatches > 0)
      error += ", " + std::to_string(r.fingerprint_mismatches) + " tensor" +
               (r.fingerprint_mismatches == 1 ? "'s" : "s'") + " stored pieces do not match the saved fingerprint";
    else if (r.damaged_pieces == 0)
      error += " (but a shard file is wrong)";
  }
  if (o.json) {
    json tensors = json::array();
    for (const auto& e : m->tensors)
      tensors.push_back({{"key", e.key}, {"dtype", std::string(dtype_name(e.dtype))}, {"shape", e.global_shape},
                         {"pieces", e.pieces.size()},
                         {"bytes", checkpoint::shape_numel(e.global_shape) * static_cast<int64_t>(dtype_size(e.dtype))},
                         {"fingerprint", e.fingerprint ? json(checkpoint::fingerprint_hex(*e.fingerprint)) : json(nullptr)}});
    json shards = json::array();
    for (const auto& s : m->shards) shards.push_back({{"rank", s.rank}, {"file", s.file}, {"bytes", s.bytes}});
    json damage = json::array();
    for (const auto& d : r.damage) damage.push_back(damage_json(d));
    json out = {{"checkpoint", arg->dir},
                {"latest_of_run", arg->run.empty() ? json(nullptr) : json(arg->run)},
                {"step", m->step},
                {"ranks", m->world_size},
                {"shards", shards},
                {"layout", saved_layout(m->state)},
                {"model_config", m->config},
                {"state", m->state},
                {"tensors", tensors},
                {"totals", {{"tensors", m->tensors.size()}, {"pieces", pieces}, {"bytes", tensor_bytes},
                            {"parameters", params}}},
                {"verify", {{"pieces", r.pieces}, {"pieces_ok", r.pieces_ok}, {"damaged_pieces", r.damaged_pieces},
                            {"bytes", r.bytes}, {"seconds", secs}, {"damage", damage},
                            {"fingerprints", {{"checked", static_cast<int64_t>(r.fingerprints.size()) - r.unfingerprinted},
                                              {"mismatched", r.fingerprint_mismatches},
                                              {"absent", r.unfingerprinted}}}}},
                {"ok", r.ok()}};
    if (!r.ok()) {
      out["error"] = error;
      out["fix"] = fix;
    }
    std::printf("%s\n", out.dump(1).c_str());
  } else {
    std::printf("total: %zu tensors, %lld pieces, %s, %lld parameters\n", m->tensors.size(), (long long)pieces,
                human_bytes(tensor_bytes).c_str(), (long long)params);
  }
  if (!r.ok()) {
    std::string list;
    for (const auto& d : r.damage) list += "\n  " + damage_text(d);
    if (r.damage.size() == checkpoint::kMaxListedDamage) list += "\n  ... (only the first ones are listed)";
    return fail(error + ":" + list + "\nfix: " + fix);
  }
  if (!o.json) {
    std::printf("all %lld pieces verified (%s in %.2f s, %.0f MB/s)\n", (long long)r.pieces,
                human_bytes(r.bytes).c_str(), secs, secs > 0 ? static_cast<double>(r.bytes) / secs / 1e6 : 0.0);
    if (r.unfingerprinted == static_cast<int64_t>(r.fingerprints.size()))
      std::printf("no fingerprints: saved by a Tessera from before they existed, so loads of it check checksums only\n");
    else
      std::printf("all %lld fingerprinted tensors match their stored pieces%s\n",
                  (long long)(static_cast<int64_t>(r.fingerprints.size()) - r.unfingerprinted),
                  r.unfingerprinted ? (" (" + std::to_string(r.unfingerprinted) + " without a fingerprint)").c_str() : "");
  }
  return 0;
}

}  // namespace tessera::cli
