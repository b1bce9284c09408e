// Straggler and load diagnosis: each rank's time per step split into compute, waiting for the other
// ranks (blocked in the step's collectives) and waiting for its own data; gathered over the world
// for metrics.jsonl and analysed at the end of a run to name the slowest rank and what it cost.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "core/status.h"

namespace tessera {

// Seconds of one step (or the mean over steps) on one rank.
struct RankStepTime {
  double compute_s = 0;  // step time minus wait_s and data_s
  double wait_s = 0;     // blocked on other ranks: collectives, cp / ep exchanges, other pipeline stages
  double data_s = 0;     // blocked on this rank's data loader
  double pipeline_wait_s = 0;  // the part of wait_s blocked on the other pipeline stages
  double update_s = 0;         // the part of compute_s in the optimizer update
  double step_s() const { return compute_s + wait_s + data_s; }
};

// Every rank's value, by world rank: one all-gather of 5 doubles per rank. Collective.
Result<std::vector<RankStepTime>> gather_step_times(Communicator& world, const RankStepTime& mine);

// [per world rank] {"compute_s", "wait_s", "data_s", "pipeline_wait_s", "update_s"}: the metrics.jsonl
// field "step_time".
nlohmann::json step_times_json(const std::vector<RankStepTime>& ranks);

struct StragglerReport {
  int slowest_rank = 0;
  double slowest_compute_s = 0, median_compute_s = 0;
  // What the others lost waiting for the slowest rank, per step: the median over the other ranks
  // of their wait minus the slowest rank's own wait (which is the communication itself: the last
  // rank to arrive waits for nobody).
  double lost_s = 0;
  double step_s = 0;         // mean step time over the ranks
  double lost_fraction = 0;  // lost_s / step_s
};

// ranks: per-step means of at least 2 ranks.
StragglerReport analyse_stragglers(const std::vector<RankStepTime>& ranks);
// "slowest rank 2: compute 1.83 s/step vs median 0.91; the others waited 0.90 s/step for it (49% of step time)"
std::string describe(const StragglerReport& r);
nlohmann::json to_json(const StragglerReport& r);

}  // namespace tessera
