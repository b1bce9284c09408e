// The sample ledger's writer and its exactly-once check.
#include "data/sample_ledger.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "data/window_index.h"

namespace tessera {

namespace fs = std::filesystem;

std::string ledger_dir(const std::string& out_dir) { return out_dir + "/ledger"; }

namespace {
Status append_line(const std::string& path, const std::string& line) {
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) return io_error("cannot append to " + path + ": check that the run directory is writable");
  const bool ok = std::fputs((line + "\n").c_str(), f) >= 0 && std::fflush(f) == 0;
  std::fclose(f);
  return ok ? Status::ok_status() : io_error("writing " + path + " failed (disk full?)");
}
}  // namespace

Result<SampleLedgerWriter> SampleLedgerWriter::open(const std::string& out_dir, const std::string& run, int dp_rank,
                                                    const LedgerRun* run_line) {
  const std::string dir = ledger_dir(out_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error("cannot create " + dir + ": " + ec.message());
  if (run_line) {
    const nlohmann::json j = {{"run", run_line->run},         {"resumed_from", run_line->resumed_from},
                              {"dp", run_line->dp},           {"micro_batch", run_line->micro_batch},
                              {"seed", run_line->seed},       {"windows", run_line->windows}};
    TS_RETURN_IF_ERROR(append_line(dir + "/runs.jsonl", j.dump()));
  }
  const std::string path = dir + "/dp" + std::to_string(dp_rank) + ".jsonl";
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) return io_error("cannot append to " + path + ": check that the run directory is writable");
  return SampleLedgerWriter(f, path, run);
}

SampleLedgerWriter::SampleLedgerWriter(SampleLedgerWriter&& o) noexcept
    : f_(std::exchange(o.f_, nullptr)), path_(std::move(o.path_)), run_(std::move(o.run_)), step_(o.step_), micro_(o.micro_) {}

SampleLedgerWriter::~SampleLedgerWriter() {
  if (f_) std::fclose(f_);
}

Status SampleLedgerWriter::record(int64_t step, const std::vector<SampleId>& samples) {
  micro_ = step == step_ ? micro_ + 1 : 0;
  step_ = step;
  nlohmann::json rows = nlohmann::json::array();
  for (const SampleId& s : samples) rows.push_back({s.epoch, s.position, s.window});
  const nlohmann::json j = {{"run", run_}, {"step", step}, {"micro", micro_}, {"samples", std::move(rows)}};
  const std::string line = j.dump() + "\n";
  if (std::fputs(line.c_str(), f_) < 0 || std::fflush(f_) != 0)
    return io_error("writing the sample ledger " + path_ + " failed (disk full?)");
  return Status::ok_status();
}

nlohmann::json LedgerReport::to_json() const {
  return {{"ok", ok()},
          {"runs", runs},
          {"recorded", recorded},
          {"voided", voided},
          {"counted", counted},
          {"windows_per_epoch", windows},
          {"complete_epochs", complete_epochs},
          {"last_epoch_positions", last_epoch_positions},
          {"duplicate_count", duplicate_count},
          {"missing_count", missing_count},
          {"misplaced_count", misplaced_count},
          {"duplicates", duplicates},
          {"missing", missing},
          {"misplaced", misplaced}};
}

namespace {

struct Use {
  int run;  // index into runs.jsonl
  int64_t step;
  std::string file;
};

Result<std::vector<nlohmann::json>> read_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("cannot read " + path);
  std::vector<nlohmann::json> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    // A crash can cut the last line short: it recorded a step that cannot have completed.
    if (j.is_discarded()) {
      if (in.peek() == EOF) break;
      return corrupt_data(path + " line " + std::to_string(n) + " is not JSON");
    }
    out.push_back(std::move(j));
  }
  return out;
}

void note(std::vector<std::string>& list, int64_t& count, std::string what) {
  if (list.size() < 20) list.push_back(std::move(what));
  ++count;
}

std::string describe(const Use& u, const std::vector<LedgerRun>& runs) {
  return "step " + std::to_string(u.step) + " of run " + runs[static_cast<size_t>(u.run)].run + " (" + u.file + ")";
}

}  // namespace

Result<LedgerReport> check_sample_ledger(const std::string& out_dir) {
  const std::string dir = ledger_dir(out_dir);
  if (!fs::is_directory(dir))
    return not_found("no sample ledger in " + out_dir + " (" + dir + "): train with train.sample_ledger = true");
  TS_ASSIGN_OR_RETURN(std::vector<nlohmann::json> run_lines, read_lines(dir + "/runs.jsonl"));
  std::vector<LedgerRun> runs;
  std::map<std::string, int> run_index;
  try {
    for (const nlohmann::json& j : run_lines) {
      LedgerRun r{j.at("run").get<std::string>(), j.at("resumed_from").get<int64_t>(), j.at("dp").get<int64_t>(),
                  j.at("micro_batch").get<int64_t>(), j.at("seed").get<uint64_t>(), j.at("windows").get<uint64_t>()};
      run_index[r.run] = static_cast<int>(runs.size());
      runs.push_back(std::move(r));
    }
  } catch (const nlohmann::json::exception& e) {
    return corrupt_data(dir + "/runs.jsonl: " + e.what());
  }
  if (runs.empty()) return corrupt_data(dir + "/runs.jsonl lists no run");
  for (const LedgerRun& r : runs)
    if (r.seed != runs.front().seed || r.windows != runs.front().windows)
      return invalid_argument("run " + r.run + " read another stream (seed " + std::to_string(r.seed) + ", " +
                              std::to_string(r.windows) + " windows) than run " + runs.front().run +
                              ": a ledger covers one dataset and seed");
  // rolled_back_after[k]: the lowest step a later run resumed from (steps after it were redone).
  std::vector<int64_t> rolled_back_after(runs.size(), INT64_MAX);
  for (size_t k = runs.size(); k-- > 1;)
    rolled_back_after[k - 1] = std::min(rolled_back_after[k], runs[k].resumed_from);

  LedgerReport rep;
  rep.runs = static_cast<int>(runs.size());
  rep.windows = runs.front().windows;
  std::map<std::pair<uint64_t, uint64_t>, std::vector<Use>> seen;  // (epoch, position) -> uses
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> window_at;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("dp", 0) != 0 || e.path().extension() != ".jsonl") continue;
    TS_ASSIGN_OR_RETURN(std::vector<nlohmann::json> lines, read_lines(e.path().string()));
    try {
      for (const nlohmann::json& j : lines) {
        const auto it = run_index.find(j.at("run").get<std::string>());
        if (it == run_index.end())
          return corrupt_data(e.path().string() + " names run " + j.at("run").get<std::string>() +
                              ", which runs.jsonl does not list");
        const Use use{it->second, j.at("step").get<int64_t>(), name};
        for (const nlohmann::json& s : j.at("samples")) {
          ++rep.recorded;
          if (use.step > rolled_back_after[static_cast<size_t>(use.run)]) {
            ++rep.voided;
            continue;
          }
          const std::pair<uint64_t, uint64_t> key{s.at(0).get<uint64_t>(), s.at(1).get<uint64_t>()};
          seen[key].push_back(use);
          window_at[key] = s.at(2).get<uint64_t>();
        }
      }
    } catch (const nlohmann::json::exception& ex) {
      return corrupt_data(e.path().string() + ": " + ex.what());
    }
  }
  // Exactly once, at every position up to the last one seen, with the window the stream puts there.
  uint64_t perm_epoch = UINT64_MAX;
  std::vector<uint32_t> perm;
  const uint64_t N = rep.windows;
  const uint64_t last_epoch = seen.empty() ? 0 : seen.rbegin()->first.first;
  const uint64_t last_pos = seen.empty() ? 0 : seen.rbegin()->first.second;
  for (uint64_t ep = 0; !seen.empty() && ep <= last_epoch; ++ep) {
    const uint64_t end = ep < last_epoch ? N : last_pos + 1;
    for (uint64_t pos = 0; pos < end; ++pos) {
      const auto it = seen.find({ep, pos});
      const std::string where = "epoch " + std::to_string(ep) + " position " + std::to_string(pos);
      if (it == seen.end()) {
        note(rep.missing, rep.missing_count, where + ": never seen");
        continue;
      }
      rep.counted += static_cast<int64_t>(it->second.size());
      if (it->second.size() > 1) {
        std::string uses;
        for (const Use& u : it->second) uses += (uses.empty() ? "" : ", ") + describe(u, runs);
        note(rep.duplicates, rep.duplicate_count,
             where + " (window " + std::to_string(window_at[{ep, pos}]) + ") seen " + std::to_string(it->second.size()) +
                 " times: " + uses);
      }
      if (ep != perm_epoch) {
        perm = epoch_permutation(N, runs.front().seed, ep);
        perm_epoch = ep;
      }
      if (window_at[{ep, pos}] != perm[pos])
        note(rep.misplaced, rep.misplaced_count,
             where + " holds window " + std::to_string(window_at[{ep, pos}]) + " where the stream has " +
                 std::to_string(perm[pos]) + " (" + describe(it->second.front(), runs) + ")");
    }
  }
  for (const auto& [key, uses] : seen)
    if (key.second >= N) note(rep.misplaced, rep.misplaced_count, "position " + std::to_string(key.second) + " beyond the epoch");
  rep.complete_epochs = seen.empty() ? 0 : static_cast<int64_t>(last_epoch) + (last_pos + 1 == N ? 1 : 0);
  rep.last_epoch_positions = seen.empty() || last_pos + 1 == N ? 0 : static_cast<int64_t>(last_pos) + 1;
  return rep;
}

}  // namespace tessera
