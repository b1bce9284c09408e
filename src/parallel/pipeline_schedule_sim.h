// Executes every rank's pipeline actions together under the runner rule of pipeline_schedule.h
// (non-blocking sends, blocking receives) with costed computes: deadlock check, message pairing
// check and bubble fraction. A model of the schedule only; no communication happens.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "parallel/pipeline_schedule.h"

namespace tessera {

struct PipelineSimulation {
  bool finished = false;  // every rank ran its whole list and every message was received
  std::string error;      // otherwise: the ranks stuck and where, or the mismatched message
  double makespan = 0;    // time the last rank finishes
  double busy = 0;        // compute time summed over ranks
  int ranks = 0;
  std::vector<double> finish;  // when each rank ends its list
  // Idle share of p * makespan: 1 - busy / (p * makespan).
  double bubble_fraction() const;
};

// schedules[r] is rank r's list (p = schedules.size()). A receive completes once its matching send
// has been issued (zero latency); the k-th send a -> b of a kind must carry the (micro, virtual
// stage) the k-th receive of that kind on b from a expects, else `error` names both. A split backward
// (zb_h1) costs backward_cost / 2 in its input-gradient pass and as much in its weight pass.
PipelineSimulation simulate_pipeline(const std::vector<std::vector<PipeAction>>& schedules,
                                     double forward_cost = 1, double backward_cost = 2);

// The same with each compute's cost given per rank and action (forward/backward/weight; e.g. the step-time
// model's seconds for that rank's chunk) and each message arriving `message_s` after its send.
PipelineSimulation simulate_pipeline(const std::vector<std::vector<PipeAction>>& schedules,
                                     const std::function<double(int rank, const PipeAction& compute)>& cost,
                                     double message_s);

// Every rank's schedule for a valid shape.
std::vector<std::vector<PipeAction>> make_all_pipeline_schedules(PipelineScheduleKind kind, const PipelineShape& shape);

// Idle fraction of the whole step with each chunk's forward costing `forward_cost` and backward
// `backward_cost` (scale-free). GPipe and 1F1B: (p-1)/(m+p-1); interleaved: (p-1)/(V m + p-1);
// ZB-H1 at forward = backward / 2: (p-1)/(3m+p-1), a third of 1F1B's idle time.
double pipeline_bubble_fraction(PipelineScheduleKind kind, const PipelineShape& shape, double forward_cost = 1,
                                double backward_cost = 2);

}  // namespace tessera
