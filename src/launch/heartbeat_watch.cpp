// Heartbeat file parsing, polling and stall detection.
#include "launch/heartbeat_watch.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/file_util.h"

namespace tessera::launch {

std::string heartbeat_file_name(int rank) { return "rank_" + std::to_string(rank) + ".json"; }

Result<Heartbeat> parse_heartbeat(std::string_view text, const std::string& source) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return corrupt_data("heartbeat file " + source + " is not a JSON object");
  Heartbeat h;
  try {
    if (!j.contains("rank") || !j.contains("phase"))
      return corrupt_data("heartbeat file " + source + " lacks \"rank\" or \"phase\"");
    h.rank = j.at("rank").get<int>();
    h.phase = j.at("phase").get<std::string>();
    h.world_size = j.value("world_size", 0);
    h.host = j.value("host", std::string());
    h.pid = j.value("pid", 0);
    h.attempt = j.value("attempt", 0);
    h.step = j.value("step", int64_t{-1});
    h.time = j.value("time", 0.0);
    h.out_dir = j.value("out_dir", std::string());
    h.message = j.value("message", std::string());
  } catch (const nlohmann::json::exception& e) {
    return corrupt_data("heartbeat file " + source + " has a field of the wrong type: " + e.what());
  }
  if (h.rank < 0) return corrupt_data("heartbeat file " + source + " has a negative rank");
  return h;
}

std::optional<Stall> find_stall(const std::vector<RankProgress>& ranks, int expected_ranks, double job_start,
                                double now, double heartbeat_timeout, double startup_timeout) {
  std::map<int, RankProgress> all;
  for (int r = 0; r < expected_ranks; ++r) all[r] = RankProgress{r, false, {}, job_start, -1};
  for (const RankProgress& p : ranks) all[p.rank] = p;

  struct Candidate {
    RankProgress p;
    double idle_s;
    double timeout;
  };
  std::vector<Candidate> stalled;
  bool any_past_timeout = false;
  for (const auto& [r, p] : all) {
    if (p.reported && (p.beat.phase == "done" || p.beat.phase == "failed")) continue;
    const double timeout = (!p.reported || p.beat.phase == "setup") ? startup_timeout : heartbeat_timeout;
    const double idle_s = now - (p.reported ? p.last_change : job_start);
    if (idle_s >= timeout) any_past_timeout = true;
    if (idle_s >= 0.5 * timeout) stalled.push_back({p, idle_s, timeout});
  }
  if (!any_past_timeout) return std::nullopt;
  // Busy relative to the busiest stalled rank: on a loaded machine spinning ranks may get a small
  // share of a core, but a hung rank gets none.
  double max_busy = 0;
  for (const Candidate& c : stalled) max_busy = std::max(max_busy, c.p.busy_fraction);
  const double busy_from = std::max(0.05, 0.25 * max_busy);
  auto key = [busy_from](const Candidate& c) {
    const bool busy = c.p.busy_fraction >= busy_from;  // unknown (<0) sorts with idle
    return std::make_tuple(c.p.reported, c.p.reported ? c.p.beat.step : -1, busy, -c.idle_s, c.p.rank);
  };
  std::sort(stalled.begin(), stalled.end(), [&](const Candidate& a, const Candidate& b) { return key(a) < key(b); });
  Stall s;
  for (const Candidate& c : stalled) s.ranks.push_back(c.p.rank);
  s.seconds = stalled.front().idle_s;
  return s;
}

HeartbeatWatch::HeartbeatWatch(std::string dir, int attempt, double job_start)
    : dir_(std::move(dir)), attempt_(attempt), job_start_(job_start) {}

std::vector<int> HeartbeatWatch::poll(double now, std::string* warn) {
  std::vector<int> changed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    // rank_<digits>.json only: the trainer's temporary files (rank_3.json.tmp...) are not heartbeats.
    if (name.size() < 11 || name.rfind("rank_", 0) != 0 || name.substr(name.size() - 5) != ".json" ||
        name.find_first_not_of("0123456789", 5) != name.size() - 5)
      continue;
    Result<std::string> text = read_file(entry.path().string());
    if (!text.ok()) continue;  // replaced or removed between listing and reading: next poll
    Result<Heartbeat> beat = parse_heartbeat(*text, entry.path().string());
    if (!beat.ok()) {
      if (warn && !warned_[name]) *warn += beat.status().message() + "; ";
      warned_[name] = true;
      continue;
    }
    if (beat->attempt != attempt_) continue;  // left over from an earlier start
    RankProgress& p = ranks_[beat->rank];
    p.rank = beat->rank;
    const bool same = p.reported && p.beat.step == beat->step && p.beat.phase == beat->phase &&
                      p.beat.time == beat->time && p.beat.pid == beat->pid;
    if (!p.reported) p.last_change = job_start_;
    if (!same) {
      p.last_change = now;
      changed.push_back(p.rank);
    }
    p.reported = true;
    p.beat = std::move(beat).value();
  }
  return changed;
}

std::vector<RankProgress> HeartbeatWatch::progress() const {
  std::vector<RankProgress> out;
  for (const auto& [r, p] : ranks_) out.push_back(p);
  return out;
}

}  // namespace tessera::launch
