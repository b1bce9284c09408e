// Runs all ranks' pipeline action lists together under the runner rule (non-blocking sends,
// blocking receives): finishes or names the stuck ranks; times the step for the bubble fraction.
#include "parallel/pipeline_schedule_sim.h"

#include <algorithm>
#include <deque>
#include <map>
#include <tuple>

#include "core/log.h"

namespace tessera {

namespace {

struct Message {
  int micro_batch, virtual_stage;  // of the compute that produced it
  double sent_at;
};

bool is_recv(PipeOp op) { return op == PipeOp::recv_activation || op == PipeOp::recv_gradient; }
bool is_send(PipeOp op) { return op == PipeOp::send_activation || op == PipeOp::send_gradient; }
bool is_activation(PipeOp op) { return op == PipeOp::recv_activation || op == PipeOp::send_activation; }

std::string where(int rank, size_t index, const PipeAction& a) {
  return "rank " + std::to_string(rank) + " action " + std::to_string(index) + " (" +
         std::string(pipe_op_name(a.op)) + " micro " + std::to_string(a.micro_batch) + " chunk " +
         std::to_string(a.chunk) + (a.peer_stage >= 0 ? " peer " + std::to_string(a.peer_stage) : "") + ")";
}

}  // namespace

double PipelineSimulation::bubble_fraction() const {
  return makespan > 0 ? 1.0 - busy / (ranks * makespan) : 0.0;
}

PipelineSimulation simulate_pipeline(const std::vector<std::vector<PipeAction>>& schedules, double forward_cost,
                                     double backward_cost) {
  // A split backward: half of backward_cost in the input-gradient pass, half in the weight pass.
  const bool split = !schedules.empty() && splits_backward(schedules[0]);
  const double b = split ? backward_cost / 2 : backward_cost;
  return simulate_pipeline(
      schedules, [&](int, const PipeAction& a) { return a.op == PipeOp::forward ? forward_cost : b; }, 0.0);
}

PipelineSimulation simulate_pipeline(const std::vector<std::vector<PipeAction>>& schedules,
                                     const std::function<double(int rank, const PipeAction& compute)>& cost,
                                     double message_s) {
  const int p = static_cast<int>(schedules.size());
  PipelineSimulation sim;
  sim.ranks = p;
  // In flight, keyed by (from, to, is_activation): MPI's order for one (source, tag).
  std::map<std::tuple<int, int, bool>, std::deque<Message>> in_flight;
  std::vector<size_t> next(p, 0);
  std::vector<double> clock(p, 0.0);
  // Round-robin until no rank can move; the times do not depend on the visiting order.
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < p; ++r) {
      for (; next[r] < schedules[r].size(); ++next[r], moved = true) {
        const PipeAction& a = schedules[r][next[r]];
        const int virtual_stage = a.chunk * p + r;
        if (a.peer_stage >= p || ((is_recv(a.op) || is_send(a.op)) && a.peer_stage < 0)) {
          sim.error = where(r, next[r], a) + ": no such peer";
          return sim;
        }
        if (is_pipe_compute(a.op)) {
          const double c = cost(r, a);
          clock[r] += c;
          sim.busy += c;
        } else if (is_send(a.op)) {
          in_flight[{r, a.peer_stage, is_activation(a.op)}].push_back({a.micro_batch, virtual_stage, clock[r]});
        } else {
          std::deque<Message>& queue = in_flight[{a.peer_stage, r, is_activation(a.op)}];
          if (queue.empty()) break;  // blocks until the peer sends
          const Message msg = queue.front();
          queue.pop_front();
          // An activation comes from the previous virtual stage, a gradient from the next one.
          const int expected = virtual_stage + (is_activation(a.op) ? -1 : 1);
          if (msg.micro_batch != a.micro_batch || msg.virtual_stage != expected) {
            sim.error = where(r, next[r], a) + " expects micro " + std::to_string(a.micro_batch) +
                        " of virtual stage " + std::to_string(expected) + " but receives micro " +
                        std::to_string(msg.micro_batch) + " of virtual stage " + std::to_string(msg.virtual_stage);
            return sim;
          }
          clock[r] = std::max(clock[r], msg.sent_at + message_s);
        }
      }
    }
  }
  std::string stuck;
  for (int r = 0; r < p; ++r)
    if (next[r] < schedules[r].size()) stuck += (stuck.empty() ? "" : "; ") + where(r, next[r], schedules[r][next[r]]);
  if (!stuck.empty()) {
    sim.error = "deadlock: " + stuck;
    return sim;
  }
  for (const auto& [key, queue] : in_flight)
    if (!queue.empty()) {
      const auto& [from, to, activation] = key;
      sim.error = std::to_string(queue.size()) + (activation ? " activation" : " gradient") + " message(s) from rank " +
                  std::to_string(from) + " to rank " + std::to_string(to) + " never received";
      return sim;
    }
  sim.finished = true;
  sim.makespan = p > 0 ? *std::max_element(clock.begin(), clock.end()) : 0.0;
  sim.finish = clock;
  return sim;
}

std::vector<std::vector<PipeAction>> make_all_pipeline_schedules(PipelineScheduleKind kind, const PipelineShape& shape) {
  std::vector<std::vector<PipeAction>> all;
  for (int s = 0; s < shape.stages; ++s) all.push_back(make_pipeline_schedule(kind, shape, s));
  return all;
}

double pipeline_bubble_fraction(PipelineScheduleKind kind, const PipelineShape& shape, double forward_cost,
                                double backward_cost) {
  const PipelineSimulation sim = simulate_pipeline(make_all_pipeline_schedules(kind, shape), forward_cost, backward_cost);
  TS_CHECK(sim.finished) << sim.error;
  return sim.bubble_fraction();
}

}  // namespace tessera
