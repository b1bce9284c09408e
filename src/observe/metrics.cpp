// JSON-lines metrics writer and reader (see metrics.h).
#include "observe/metrics.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace tessera {

namespace fs = std::filesystem;

std::string metrics_path(const std::string& run_dir_or_file) {
  // An existing file or a *.jsonl name is the metrics file itself; anything else names a run directory,
  // so a missing run is reported as its missing <dir>/metrics.jsonl.
  std::error_code ec;
  const fs::path p(run_dir_or_file);
  if (fs::is_regular_file(p, ec) || p.extension() == ".jsonl") return run_dir_or_file;
  return (p / "metrics.jsonl").string();
}

Result<MetricsWriter> MetricsWriter::open(const std::string& out_dir, bool append) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return io_error("cannot create run directory '" + out_dir + "': " + ec.message());
  MetricsWriter w;
  w.path_ = (fs::path(out_dir) / "metrics.jsonl").string();
  std::FILE* f = std::fopen(w.path_.c_str(), append ? "ab" : "wb");
  if (!f) return io_error("cannot open '" + w.path_ + "' for writing: " + std::strerror(errno));
  w.file_.reset(f);
  return w;
}

Status MetricsWriter::write(const nlohmann::json& event) {
  if (!file_) return internal_error("metrics writer is not open");
  // NaN/inf dump as null: a diverged loss stays visible as a gap rather than breaking the JSON.
  std::string line = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_.get()) != line.size() || std::fflush(file_.get()) != 0)
    return io_error("cannot write to '" + path_ + "': " + std::strerror(errno) + " (disk full?)");
  return Status::ok_status();
}

Status MetricsWriter::log_train(const TrainEvent& e) {
  nlohmann::json j = {{"step", e.step},       {"loss", e.loss},           {"lr", e.lr},
                      {"grad_norm", e.grad_norm}, {"tokens_per_s", e.tokens_per_s}, {"mfu", e.mfu},
                      {"mem_mb", e.mem_mb},   {"time_s", e.time_s}};
  if (e.extra.is_object()) j.update(e.extra);
  return write(j);
}

Status MetricsWriter::log_eval(int64_t step, double val_loss, const nlohmann::json& extra) {
  nlohmann::json j = {{"step", step}, {"val_loss", val_loss}};
  if (extra.is_object()) j.update(extra);
  return write(j);
}

nlohmann::json memory_stats_json(const MemoryStats& s) {
  nlohmann::json j = nlohmann::json::object();
  for (int c = 0; c < kNumMemCategories; ++c)
    j[std::string(mem_category_name(static_cast<MemCategory>(c)))] = {{"live", s.live[c]}, {"peak", s.peak[c]}};
  j["total"] = {{"live", s.total_live}, {"peak", s.total_peak}};
  return j;
}

Result<nlohmann::json> gather_memory_stats(Communicator& world) {
  constexpr int kWords = 2 * (kNumMemCategories + 1);
  const MemoryStats s = memory_stats();
  std::array<int64_t, kWords> mine{};
  for (int c = 0; c < kNumMemCategories; ++c) {
    mine[2 * c] = static_cast<int64_t>(s.live[c]);
    mine[2 * c + 1] = static_cast<int64_t>(s.peak[c]);
  }
  mine[2 * kNumMemCategories] = static_cast<int64_t>(s.total_live);
  mine[2 * kNumMemCategories + 1] = static_cast<int64_t>(s.total_peak);
  std::vector<int64_t> all(static_cast<size_t>(kWords) * static_cast<size_t>(world.size()));
  if (world.size() == 1) {
    std::copy(mine.begin(), mine.end(), all.begin());
  } else {
    const Status st = world.all_gather_async(mine.data(), all.data(), sizeof(mine), DType::u8).wait();
    if (!st.ok()) return Status(st.code(), "gathering the ranks' memory counters for metrics: " + st.message());
  }
  nlohmann::json out = nlohmann::json::array();
  for (int r = 0; r < world.size(); ++r) {
    const int64_t* w = all.data() + static_cast<size_t>(r) * kWords;
    MemoryStats m;
    for (int c = 0; c < kNumMemCategories; ++c) {
      m.live[c] = static_cast<size_t>(w[2 * c]);
      m.peak[c] = static_cast<size_t>(w[2 * c + 1]);
    }
    m.total_live = static_cast<size_t>(w[2 * kNumMemCategories]);
    m.total_peak = static_cast<size_t>(w[2 * kNumMemCategories + 1]);
    out.push_back(memory_stats_json(m));
  }
  return out;
}

namespace {

double number_or_nan(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::numeric_limits<double>::quiet_NaN();
  return it->get<double>();
}

// Drops the tail of a series from `step` on: the events after a resume replace those.
template <typename... V>
void truncate_from(int64_t step, std::vector<int64_t>& steps, V&... values) {
  size_t keep = 0;
  while (keep < steps.size() && steps[keep] < step) ++keep;
  steps.resize(keep);
  (values.resize(keep), ...);
}

}  // namespace

Result<MetricsSeries> read_metrics(const std::string& path_in) {
  const std::string path = metrics_path(path_in);
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return not_found("no metrics file '" + path + "': pass a run directory holding metrics.jsonl (written by "
                     "`tessera train`) or the file itself");
  std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  MetricsSeries s;
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < content.size()) {
    size_t nl = content.find('\n', pos);
    const bool last_unterminated = nl == std::string::npos;
    std::string line = content.substr(pos, last_unterminated ? std::string::npos : nl - pos);
    pos = last_unterminated ? content.size() : nl + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      if (last_unterminated) break;  // partial line of a killed writer
      return corrupt_data(path + ":" + std::to_string(line_no) + ": not a JSON object: " + line.substr(0, 80));
    }
    auto st = j.find("step");
    if (st == j.end() || !st->is_number_integer())
      return corrupt_data(path + ":" + std::to_string(line_no) + ": event without an integer \"step\"");
    const int64_t step = st->get<int64_t>();
    if (j.contains("loss")) {
      if (!s.step.empty() && step <= s.step.back()) {
        truncate_from(step, s.step, s.loss, s.lr, s.grad_norm, s.tokens_per_s, s.mfu, s.mem_mb, s.time_s);
        truncate_from(step + 1, s.eval_step, s.val_loss);  // evals after the resume point are stale too
      }
      s.step.push_back(step);
      s.loss.push_back(number_or_nan(j, "loss"));
      s.lr.push_back(number_or_nan(j, "lr"));
      s.grad_norm.push_back(number_or_nan(j, "grad_norm"));
      s.tokens_per_s.push_back(number_or_nan(j, "tokens_per_s"));
      s.mfu.push_back(number_or_nan(j, "mfu"));
      s.mem_mb.push_back(number_or_nan(j, "mem_mb"));
      s.time_s.push_back(number_or_nan(j, "time_s"));
    }
    if (j.contains("val_loss")) {
      if (!s.eval_step.empty() && step <= s.eval_step.back()) truncate_from(step, s.eval_step, s.val_loss);
      s.eval_step.push_back(step);
      s.val_loss.push_back(number_or_nan(j, "val_loss"));
    }
  }
  return s;
}

}  // namespace tessera
