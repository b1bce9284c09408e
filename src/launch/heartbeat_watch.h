// The heartbeat files of a running job (<dir>/rank_<r>.json, one per rank, replaced atomically by
// the trainer whenever it makes progress) and the decision "which rank made no progress".
// Progress is judged by when the launcher saw a file change, on its own clock: no trust in the
// clocks of other hosts or in file-system mtimes.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera::launch {

// One rank's heartbeat file: {"rank", "world_size", "host", "pid", "attempt", "step" (last completed
// step), "phase" (setup|train|checkpoint|done|failed|preempted), "time" (unix seconds), "out_dir", "message"}.
struct Heartbeat {
  int rank = -1;
  int world_size = 0;
  std::string host;
  int pid = 0;
  int attempt = 0;
  int64_t step = -1;
  std::string phase;
  double time = 0;
  std::string out_dir;
  std::string message;
};

// Parses a heartbeat file's text; `source` names it in errors. rank and phase are required.
Result<Heartbeat> parse_heartbeat(std::string_view text, const std::string& source);

// What the launcher knows about one rank's progress in the current attempt.
struct RankProgress {
  int rank = -1;
  bool reported = false;   // a heartbeat of this attempt has been read
  Heartbeat beat;          // the latest one
  double last_change = 0;  // launcher clock (seconds) when the file last changed, or the job's start
  // Share of one core the rank's process used since last_change (from /proc, same host only);
  // negative when unknown. A hung rank idles while the ranks waiting for it in a collective spin.
  double busy_fraction = -1;
};

struct Stall {
  // Stalled ranks, the most likely cause first: never reported, then lowest step, then idle before
  // busy, then oldest heartbeat.
  std::vector<int> ranks;
  double seconds = 0;  // the first rank's time without progress
};

// The ranks that made no progress: a rank in set-up (or not yet reported) gets `startup_timeout`
// seconds, one in train/checkpoint `heartbeat_timeout`; done/failed ranks never stall. Ranks
// 0..expected_ranks-1 are expected (when expected_ranks > 0) even if they never reported. Returns
// nothing while no rank is past its timeout; otherwise every rank without progress for at least
// half its timeout, culprit first.
std::optional<Stall> find_stall(const std::vector<RankProgress>& ranks, int expected_ranks, double job_start,
                                double now, double heartbeat_timeout, double startup_timeout);

// Reads the heartbeat files of one attempt of the job.
class HeartbeatWatch {
 public:
  HeartbeatWatch(std::string dir, int attempt, double job_start);

  // Re-reads every rank_<r>.json in the directory; files of other attempts are ignored, a file that
  // does not parse is reported once through `warn` and skipped. Returns the ranks whose file changed.
  std::vector<int> poll(double now, std::string* warn);

  const std::map<int, RankProgress>& ranks() const { return ranks_; }
  std::map<int, RankProgress>& ranks() { return ranks_; }
  // Every known rank (reported or not) as a list for find_stall.
  std::vector<RankProgress> progress() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  int attempt_;
  double job_start_;
  std::map<int, RankProgress> ranks_;
  std::map<std::string, bool> warned_;
};

// "rank_<r>.json" for rank r.
std::string heartbeat_file_name(int rank);

}  // namespace tessera::launch
