// Pipeline schedules across ranks: sends pair with receives, every allowed shape runs to the end
// under the runner rule (non-blocking sends, blocking receives), the simulator catches a deadlock
// and a mismatched message, and the bubble fractions of GPipe, 1F1B and interleaved 1F1B.
#include "parallel/pipeline_schedule_sim.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <tuple>
#include <utility>

#include "pipeline_test_util.h"

namespace tessera {
namespace {

using testing::allowed_cases;
using testing::ScheduleCase;
using Kind = PipelineScheduleKind;

// (micro, virtual stage that produced the tensor), read from the sender's and the receiver's lists
// on their own: the k-th send a -> b of a kind must equal the k-th receive of that kind on b from a.
TEST(PipelineSchedules, SendsMatchReceivesAcrossRanks) {
  for (const ScheduleCase& c : allowed_cases()) {
    SCOPED_TRACE(c.name());
    const int p = c.shape.stages;
    using Key = std::tuple<int, int, bool>;  // from, to, activation?
    std::map<Key, std::vector<std::pair<int, int>>> sent, received;
    for (int s = 0; s < p; ++s)
      for (const PipeAction& a : make_pipeline_schedule(c.kind, c.shape, s)) {
        const int virtual_stage = a.chunk * p + s;
        switch (a.op) {
          case PipeOp::send_activation: sent[{s, a.peer_stage, true}].push_back({a.micro_batch, virtual_stage}); break;
          case PipeOp::send_gradient: sent[{s, a.peer_stage, false}].push_back({a.micro_batch, virtual_stage}); break;
          case PipeOp::recv_activation:
            received[{a.peer_stage, s, true}].push_back({a.micro_batch, virtual_stage - 1});
            break;
          case PipeOp::recv_gradient:
            received[{a.peer_stage, s, false}].push_back({a.micro_batch, virtual_stage + 1});
            break;
          default: break;
        }
      }
    EXPECT_EQ(sent, received);
    if (p * c.shape.virtual_stages > 1) {
      EXPECT_FALSE(sent.empty());
    }
  }
}

// The deadlock test: every allowed (kind, p, m, V) with p <= 6, m <= 12, V <= 3 finishes on every rank.
TEST(PipelineSchedules, NoDeadlockUnderTheRunnerRule) {
  const std::vector<ScheduleCase> cases = allowed_cases();
  EXPECT_EQ(cases.size(), 72u + 72u + 34u + 72u);  // gpipe, 1f1b, zb-h1: V = 1; interleaved: p >= 2, V >= 2, p | m
  for (const ScheduleCase& c : cases) {
    const PipelineSimulation sim = simulate_pipeline(make_all_pipeline_schedules(c.kind, c.shape));
    EXPECT_TRUE(sim.finished) << c.name() << ": " << sim.error;
  }
}

TEST(PipelineSimulator, ReportsADeadlock) {
  // Each rank waits for the other's activation before sending its own.
  const std::vector<std::vector<PipeAction>> ranks = {
      {{PipeOp::recv_activation, 0, 1, 1}, {PipeOp::forward, 0, 1, -1}, {PipeOp::send_activation, 0, 1, 1}},
      {{PipeOp::recv_activation, 0, 0, 0}, {PipeOp::forward, 0, 0, -1}, {PipeOp::send_activation, 0, 0, 0}}};
  const PipelineSimulation sim = simulate_pipeline(ranks);
  EXPECT_FALSE(sim.finished);
  EXPECT_NE(sim.error.find("deadlock: rank 0 action 0 (recv_activation micro 0 chunk 1 peer 1); rank 1 action 0"),
            std::string::npos)
      << sim.error;
}

TEST(PipelineSimulator, ReportsAMismatchedMessage) {
  std::vector<std::vector<PipeAction>> ranks = make_all_pipeline_schedules(Kind::gpipe, {2, 2, 1});
  ASSERT_EQ(describe_with_comm(ranks[0]), "F0 sa0>1 F1 sa1>1 rg0<1 B0 rg1<1 B1");
  std::swap(ranks[0][1], ranks[0][3]);  // sends micro 1's activation first
  const PipelineSimulation sim = simulate_pipeline(ranks);
  EXPECT_FALSE(sim.finished);
  EXPECT_NE(sim.error.find("expects micro 0 of virtual stage 0 but receives micro 1"), std::string::npos) << sim.error;
}

TEST(PipelineSimulator, ReportsAnUnreceivedMessage) {
  const std::vector<std::vector<PipeAction>> ranks = {{{PipeOp::send_gradient, 0, 0, 1}}, {}};
  const PipelineSimulation sim = simulate_pipeline(ranks);
  EXPECT_FALSE(sim.finished);
  EXPECT_NE(sim.error.find("1 gradient message(s) from rank 0 to rank 1 never received"), std::string::npos)
      << sim.error;
}

// Unit-time forward, 2-unit backward, free communication: GPipe and 1F1B idle (p-1)/(m+p-1) of the
// step; interleaving divides the fill and drain by V: (p-1)/(V m + p-1).
TEST(PipelineSchedules, BubbleFraction) {
  for (const ScheduleCase& c : allowed_cases()) {
    SCOPED_TRACE(c.name());
    const int p = c.shape.stages, m = c.shape.micro_batches, V = c.shape.virtual_stages;
    const double bubble = pipeline_bubble_fraction(c.kind, c.shape);
    if (c.kind == Kind::interleaved) {
      EXPECT_NEAR(bubble, double(p - 1) / (V * m + p - 1), 1e-12);
      EXPECT_LT(bubble, pipeline_bubble_fraction(Kind::one_f_one_b, {p, m, 1}));
    } else if (c.kind == Kind::zb_h1) {
      // Forward, input- and weight-gradient passes of equal cost: idle (p - 1) per rank against
      // 1F1B's 3 (p - 1) once m >= p; fewer micro-batches still idle less than 1F1B.
      if (m >= p) EXPECT_NEAR(bubble, double(p - 1) / (3 * m + p - 1), 1e-12);
      if (p > 1) EXPECT_LT(bubble, pipeline_bubble_fraction(Kind::one_f_one_b, {p, m, 1}));
    } else {
      EXPECT_NEAR(bubble, double(p - 1) / (m + p - 1), 1e-12);
    }
  }
  const PipelineSimulation sim = simulate_pipeline(make_all_pipeline_schedules(Kind::one_f_one_b, {4, 8, 1}));
  EXPECT_EQ(sim.makespan, 3.0 * (8 + 4 - 1));
  EXPECT_EQ(sim.busy, 4 * 3.0 * 8);
  const PipelineSimulation zb = simulate_pipeline(make_all_pipeline_schedules(Kind::zb_h1, {4, 8, 1}));
  EXPECT_EQ(zb.makespan, 3.0 * 8 + (4 - 1));  // idle (p - 1) x (F + B - W) = 3 per rank against 1F1B's 9
  std::printf("bubble p=4 m=8: gpipe %.4f  1f1b %.4f  interleaved V=2 %.4f  zb-h1 %.4f\n",
              pipeline_bubble_fraction(Kind::gpipe, {4, 8, 1}), pipeline_bubble_fraction(Kind::one_f_one_b, {4, 8, 1}),
              pipeline_bubble_fraction(Kind::interleaved, {4, 8, 2}), pipeline_bubble_fraction(Kind::zb_h1, {4, 8, 1}));
}

}  // namespace
}  // namespace tessera
