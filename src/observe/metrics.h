// Training metrics as JSON lines (<out_dir>/metrics.jsonl, one event per line, flushed per line) and
// a reader that turns such a file back into series for plots and tests.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "core/memory.h"
#include "core/status.h"

namespace tessera {

// One training log event. Fields that are unknown at a call site may stay NaN (written as null).
struct TrainEvent {
  int64_t step = 0;
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;
  double tokens_per_s = 0;
  double mfu = 0;        // model FLOPs utilisation, 0..1
  double mem_mb = 0;     // accounted memory in MiB
  double time_s = 0;     // wall time since the run started
  nlohmann::json extra;  // further fields merged into the line (an object, or null)
};

class MetricsWriter {
 public:
  // Creates out_dir (and parents) and opens <out_dir>/metrics.jsonl; append=false truncates it.
  static Result<MetricsWriter> open(const std::string& out_dir, bool append = true);
  // {"step","loss","lr","grad_norm","tokens_per_s","mfu","mem_mb","time_s", ...extra}
  Status log_train(const TrainEvent& e);
  // {"step","val_loss", ...extra}
  Status log_eval(int64_t step, double val_loss, const nlohmann::json& extra = nullptr);
  // Any object, one line; flushed before returning.
  Status write(const nlohmann::json& event);
  const std::string& path() const { return path_; }

 private:
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Closer> file_;
  std::string path_;
};

// The allocator's counters (core/memory.h) as {"parameters": {"live": bytes, "peak": bytes}, ...,
// "other": {...}, "total": {...}}; the categories by mem_category_name.
nlohmann::json memory_stats_json(const MemoryStats& s);
// Every rank's memory_stats_json, by world rank (a JSON array): one all-gather of 2 x 7 int64 per
// rank over `world`. Collective: every rank calls it at the same step.
Result<nlohmann::json> gather_memory_stats(Communicator& world);

// Series read back from a metrics file. Train events have "loss", eval events "val_loss". When a
// step number repeats or goes back (a run resumed from an earlier checkpoint), the later events
// replace the earlier ones from that step on (a train event also drops later evals), so every
// series has strictly increasing steps.
struct MetricsSeries {
  std::vector<int64_t> step;  // train events
  std::vector<double> loss, lr, grad_norm, tokens_per_s, mfu, mem_mb, time_s;  // NaN where missing/null
  std::vector<int64_t> eval_step;
  std::vector<double> val_loss;
};

// path: a metrics.jsonl file or a run directory holding one. An unparseable last line without a
// newline (a process killed mid-write) is skipped; any other bad line is an error naming its number.
Result<MetricsSeries> read_metrics(const std::string& path);
// path itself when it is an existing file or ends in ".jsonl", else <path>/metrics.jsonl.
std::string metrics_path(const std::string& run_dir_or_file);

}  // namespace tessera
