// tessera checkpoint fingerprint | diff: printing (text or --json) what checkpoint/inspect.h and
// checkpoint/diff.h compute.
#include "cli/cmd_checkpoint_compare.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "checkpoint/diff.h"
#include "checkpoint/fingerprint.h"
#include "checkpoint/inspect.h"
#include "checkpoint/reader.h"
#include "cli/cmd_checkpoint_inspect.h"
#include "cli/commands.h"

namespace tessera::cli {
using nlohmann::json;
namespace {

json hex_or_null(const std::optional<uint64_t>& f) {
  return f ? json(checkpoint::fingerprint_hex(*f)) : json(nullptr);
}
std::string hex_or_none(const std::optional<uint64_t>& f) { return f ? checkpoint::fingerprint_hex(*f) : "none"; }

std::string pieces_text(const std::vector<checkpoint::DifferingPiece>& pieces) {
  std::string s;
  for (const auto& p : pieces)
    s += (s.empty() ? "" : ", ") + ("rank " + std::to_string(p.rank) + " [" + std::to_string(p.begin) + ", " +
                                    std::to_string(p.end) + ")");
  return s.empty() ? "none" : s;
}

json pieces_json(const std::vector<checkpoint::DifferingPiece>& pieces) {
  json out = json::array();
  for (const auto& p : pieces) out.push_back({{"rank", p.rank}, {"elements", {p.begin, p.end}}});
  return out;
}

}  // namespace

int run_checkpoint_fingerprint(const FingerprintOptions& o) {
  auto arg = resolve_checkpoint_arg(o.path);
  if (!arg.ok()) return fail(arg.status());
  auto m = checkpoint::read_manifest(arg->dir);  // refuses overlapping or missing ranges (coverage)
  if (!m.ok()) return fail(m.status().message() + "\nfix: " + checkpoint::recovery_advice(arg->dir));
  const checkpoint::VerifyReport r = checkpoint::verify_checkpoint(arg->dir, *m);
  if (o.json) {
    json tensors = json::array();
    for (const auto& f : r.fingerprints)
      tensors.push_back({{"key", f.key}, {"saved", hex_or_null(f.saved)},
                         {"stored", f.complete ? json(checkpoint::fingerprint_hex(f.stored)) : json(nullptr)},
                         {"ok", f.matches() || (!f.saved && f.complete)}});
    json damage = json::array();
    for (const auto& d : r.damage) damage.push_back({{"file", d.file}, {"rank", d.rank}, {"key", d.key}, {"what", d.what}});
    std::printf("%s\n", json({{"checkpoint", arg->dir},
                              {"step", m->step},
                              {"ranks", m->world_size},
                              {"tensors", tensors},
                              {"state_fingerprint", hex_or_null(m->state_fingerprint)},
                              {"mismatched", r.fingerprint_mismatches},
                              {"without_fingerprint", r.unfingerprinted},
                              {"damage", damage},
                              {"ok", r.ok()}})
                            .dump(1)
                            .c_str());
  } else {
    std::printf("checkpoint %s (step %lld, saved by %d rank%s)\n", arg->dir.c_str(), (long long)m->step,
                m->world_size, m->world_size == 1 ? "" : "s");
    std::printf("%-40s %-16s %s\n", "tensor", "fingerprint", "stored pieces");
    for (const auto& f : r.fingerprints) {
      const char* verdict = !f.complete ? "unreadable piece"
                            : !f.saved  ? "no saved fingerprint (saved before fingerprints existed)"
                            : f.matches() ? "match"
                                          : "MISMATCH";
      std::printf("%-40s %-16s %s%s\n", f.key.c_str(), hex_or_none(f.saved).c_str(), verdict,
                  f.complete && f.saved && !f.matches() ? (" (pieces sum to " + checkpoint::fingerprint_hex(f.stored) + ")").c_str()
                                                        : "");
    }
    // Checked when the manifest was read (a mismatch refuses the whole manifest before this point).
    std::printf("%-40s %-16s %s\n", "(training state)", hex_or_none(m->state_fingerprint).c_str(),
                m->state_fingerprint ? "match" : "no saved fingerprint (saved before fingerprints existed)");
  }
  if (!r.ok()) {
    std::string list;
    for (const auto& d : r.damage)
      list += "\n  " + (d.key.empty() ? "'" + d.file + "'" : "tensor '" + d.key + "'") + ": " + d.what;
    return fail("checkpoint '" + arg->dir + "' does not verify:" + list + "\nfix: " +
                checkpoint::recovery_advice(arg->dir));
  }
  if (!o.json) {
    if (r.unfingerprinted == static_cast<int64_t>(r.fingerprints.size()))
      std::printf("no fingerprints: saved by a Tessera from before they existed; checksums verified only\n");
    else
      std::printf("all %lld fingerprinted tensors match their stored pieces\n",
                  (long long)(static_cast<int64_t>(r.fingerprints.size()) - r.unfingerprinted));
  }
  return 0;
}

int run_checkpoint_diff(const DiffOptions& o) {
  auto a = resolve_checkpoint_arg(o.a);
  if (!a.ok()) return fail(a.status());
  auto b = resolve_checkpoint_arg(o.b);
  if (!b.ok()) return fail(b.status());
  auto d = checkpoint::diff_checkpoints(a->dir, b->dir);
  if (!d.ok()) return fail(d.status());
  int64_t differing = 0;
  for (const auto& t : d->tensors) differing += t.kind != checkpoint::TensorDiffKind::equal;
  if (o.json) {
    json tensors = json::array();
    for (const auto& t : d->tensors) {
      json j = {{"key", t.key}, {"result", checkpoint::tensor_diff_kind_name(t.kind)},
                {"fingerprint_a", hex_or_null(t.fingerprint_a)}, {"fingerprint_b", hex_or_null(t.fingerprint_b)}};
      if (t.kind == checkpoint::TensorDiffKind::differs) {
        j["differing_elements"] = t.differing;
        j["numel"] = t.numel;
        j["first_difference"] = t.first_difference;
        j["max_abs_diff"] = t.max_abs_diff ? json(*t.max_abs_diff) : json(nullptr);
        j["pieces_a"] = pieces_json(t.pieces_a);
        j["pieces_b"] = pieces_json(t.pieces_b);
      }
      if (!t.detail.empty()) j["detail"] = t.detail;
      tensors.push_back(j);
    }
    std::printf("%s\n", json({{"a", d->a}, {"b", d->b}, {"ranks_a", d->ranks_a}, {"ranks_b", d->ranks_b},
                              {"equal", d->equal()}, {"differing_tensors", differing},
                              {"config_differences", d->config_differences},
                              {"state_differences", d->state_differences}, {"tensors", tensors}})
                            .dump(1)
                            .c_str());
  } else {
    std::printf("a: %s (saved by %d rank%s)\nb: %s (saved by %d rank%s)\n", d->a.c_str(), d->ranks_a,
                d->ranks_a == 1 ? "" : "s", d->b.c_str(), d->ranks_b, d->ranks_b == 1 ? "" : "s");
    for (const auto& t : d->tensors) {
      std::string line = t.key + ": " + checkpoint::tensor_diff_kind_name(t.kind);
      if (t.kind == checkpoint::TensorDiffKind::differs) {
        char buf[160];
        std::snprintf(buf, sizeof buf, " (%lld of %lld elements, first at %lld", (long long)t.differing,
                      (long long)t.numel, (long long)t.first_difference);
        line += buf;
        if (t.max_abs_diff) {
          std::snprintf(buf, sizeof buf, ", max abs difference %.6g", *t.max_abs_diff);
          line += buf;
        }
        line += "; pieces of a: " + pieces_text(t.pieces_a) + "; pieces of b: " + pieces_text(t.pieces_b) + ")";
      }
      if (!t.detail.empty()) line += " (" + t.detail + ")";
      std::printf("%s\n", line.c_str());
    }
    for (const auto& c : d->config_differences) std::printf("model config differs: %s (a vs b)\n", c.c_str());
    for (const auto& s : d->state_differences) std::printf("state differs: %s (a vs b)\n", s.c_str());
    if (d->equal())
      std::printf("equal: all %zu tensors, the model config and the training state\n", d->tensors.size());
    else
      std::printf("different: %lld of %zu tensors differ, %zu config and %zu state fields differ\n", (long long)differing,
                  d->tensors.size(), d->config_differences.size(), d->state_differences.size());
  }
  return d->equal() ? 0 : 1;
}

}  // namespace tessera::cli
