// Pipeline schedules as data: names, shape validation, the classic 1F1B / interleaved sequences,
// where the sends and receives sit, every forward before its backward, and peak activations.
#include "parallel/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

#include "pipeline_test_util.h"

namespace tessera {
namespace {

using testing::allowed_cases;
using testing::ScheduleCase;
using Kind = PipelineScheduleKind;

TEST(PipelineSchedule, NamesRoundTrip) {
  for (Kind kind : {Kind::gpipe, Kind::one_f_one_b, Kind::interleaved, Kind::zb_h1}) {
    auto parsed = parse_pipeline_schedule(pipeline_schedule_name(kind));
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_EQ(pipeline_schedule_name(Kind::one_f_one_b), "1f1b");
  auto bad = parse_pipeline_schedule("pipedream");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"1f1b\""), std::string::npos) << bad.status().message();
}

TEST(PipelineSchedule, ValidationErrorsNameTheFix) {
  auto error = [](Kind kind, PipelineShape shape) { return validate_pipeline_shape(kind, shape).message(); };
  EXPECT_TRUE(validate_pipeline_shape(Kind::one_f_one_b, {4, 3, 1}).ok());  // m < p is fine for 1F1B
  EXPECT_TRUE(validate_pipeline_shape(Kind::interleaved, {4, 8, 2}).ok());
  EXPECT_NE(error(Kind::interleaved, {4, 6, 2}).find("multiple of the 4 pipeline stages"), std::string::npos);
  EXPECT_NE(error(Kind::interleaved, {4, 6, 2}).find("use 4 or 8 micro-batches"), std::string::npos)
      << error(Kind::interleaved, {4, 6, 2});
  EXPECT_NE(error(Kind::interleaved, {4, 3, 2}).find("use 4 micro-batches"), std::string::npos)
      << error(Kind::interleaved, {4, 3, 2});
  EXPECT_NE(error(Kind::interleaved, {4, 8, 1}).find("virtual stages to 2 or more"), std::string::npos);
  EXPECT_NE(error(Kind::interleaved, {1, 4, 2}).find("use \"1f1b\""), std::string::npos);
  EXPECT_NE(error(Kind::gpipe, {4, 8, 2}).find("use the \"interleaved\" schedule"), std::string::npos);
  EXPECT_NE(error(Kind::one_f_one_b, {0, 8, 1}).find("pipeline stages must be at least 1"), std::string::npos);
  EXPECT_NE(error(Kind::one_f_one_b, {2, 0, 1}).find("micro-batches"), std::string::npos);
}

// The textbook PipeDream-flush pictures (Narayanan et al. 2021, figure 4 top), p = 4, m = 8.
TEST(PipelineSchedule, ClassicOneFOneBStages) {
  const PipelineShape shape{4, 8, 1};
  const std::string first = describe(make_pipeline_schedule(Kind::one_f_one_b, shape, 0));
  const std::string last = describe(make_pipeline_schedule(Kind::one_f_one_b, shape, 3));
  std::printf("1f1b p=4 m=8 stage 0: %s\n1f1b p=4 m=8 stage 3: %s\n", first.c_str(), last.c_str());
  EXPECT_EQ(first, "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  EXPECT_EQ(describe(make_pipeline_schedule(Kind::one_f_one_b, shape, 1)),
            "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
  EXPECT_EQ(last, "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
  EXPECT_EQ(describe(make_pipeline_schedule(Kind::gpipe, {4, 3, 1}, 2)), "F0 F1 F2 B0 B1 B2");
  // Fewer micro-batches than stages: the warm-up is cut at m.
  EXPECT_EQ(describe(make_pipeline_schedule(Kind::one_f_one_b, {4, 2, 1}, 0)), "F0 F1 B0 B1");
}

// Megatron's interleaved schedule (Narayanan et al. 2021, figure 4 bottom), p = 4, m = 8, V = 2:
// "F3.1" is micro-batch 3 through this rank's chunk 1 (virtual stage 4 + stage).
TEST(PipelineSchedule, ClassicInterleavedStages) {
  const PipelineShape shape{4, 8, 2};
  EXPECT_EQ(describe(make_pipeline_schedule(Kind::interleaved, shape, 0)),
            "F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1 F4.0 F5.0 F6.0 B0.1 F7.0 B1.1 F4.1 B2.1 F5.1 B3.1 F6.1 B0.0 "
            "F7.1 B1.0 B2.0 B3.0 B4.1 B5.1 B6.1 B7.1 B4.0 B5.0 B6.0 B7.0");
  EXPECT_EQ(describe(make_pipeline_schedule(Kind::interleaved, shape, 3)),
            "F0.0 F1.0 F2.0 F3.0 F0.1 B0.1 F1.1 B1.1 F2.1 B2.1 F3.1 B3.1 F4.0 B0.0 F5.0 B1.0 F6.0 B2.0 F7.0 B3.0 "
            "F4.1 B4.1 F5.1 B5.1 F6.1 B6.1 F7.1 B7.1 B4.0 B5.0 B6.0 B7.0");
  EXPECT_EQ(pipeline_warmup_forwards(Kind::interleaved, shape, 0), 10);
  EXPECT_EQ(pipeline_warmup_forwards(Kind::interleaved, shape, 3), 4);
}

// The send comes right after the forward that produced it, before the stage waits for a gradient.
TEST(PipelineSchedule, SendsAndReceivesAroundTheComputes) {
  const PipelineShape shape{2, 3, 1};
  EXPECT_EQ(describe_with_comm(make_pipeline_schedule(Kind::one_f_one_b, shape, 0)),
            "F0 sa0>1 F1 sa1>1 rg0<1 B0 F2 sa2>1 rg1<1 B1 rg2<1 B2");
  EXPECT_EQ(describe_with_comm(make_pipeline_schedule(Kind::one_f_one_b, shape, 1)),
            "ra0<0 F0 B0 sg0>0 ra1<0 F1 B1 sg1>0 ra2<0 F2 B2 sg2>0");
  // Interleaved on 2 ranks: chunk 1 of rank 0 receives from rank 1 (virtual stage 1 -> 2).
  EXPECT_EQ(describe_with_comm(make_pipeline_schedule(Kind::interleaved, {2, 2, 2}, 0)),
            "F0.0 sa0.0>1 F1.0 sa1.0>1 ra0.1<1 F0.1 sa0.1>1 ra1.1<1 F1.1 sa1.1>1 rg0.1<1 B0.1 sg0.1>1 rg1.1<1 B1.1 "
            "sg1.1>1 rg0.0<1 B0.0 rg1.0<1 B1.0");
}

// Each (micro, chunk) runs forward and backward exactly once, forward first; each compute has exactly
// the receive before it and the send after it that its virtual stage needs, and nothing else is there.
TEST(PipelineSchedule, EveryForwardOnceBeforeItsBackwardWithItsCommunication) {
  for (const ScheduleCase& c : allowed_cases()) {
    const int p = c.shape.stages, m = c.shape.micro_batches, V = c.shape.virtual_stages;
    for (int s = 0; s < p; ++s) {
      SCOPED_TRACE(c.name() + " stage " + std::to_string(s));
      const std::vector<PipeAction> actions = make_pipeline_schedule(c.kind, c.shape, s);
      std::map<std::pair<int, int>, int> forward_at, backward_at, weight_at;
      size_t communication = 0;
      for (size_t i = 0; i < actions.size(); ++i) {
        const PipeAction& a = actions[i];
        ASSERT_TRUE(a.micro_batch >= 0 && a.micro_batch < m && a.chunk >= 0 && a.chunk < V);
        if (a.op == PipeOp::weight) {  // no communication of its own, once, after its backward
          EXPECT_EQ(a.peer_stage, -1);
          ASSERT_TRUE(weight_at.emplace(std::pair{a.micro_batch, a.chunk}, static_cast<int>(i)).second) << "twice";
          continue;
        }
        if (a.op != PipeOp::forward && a.op != PipeOp::backward) {
          ++communication;
          continue;
        }
        const bool forward = a.op == PipeOp::forward;
        auto& seen = forward ? forward_at : backward_at;
        ASSERT_TRUE(seen.emplace(std::pair{a.micro_batch, a.chunk}, static_cast<int>(i)).second) << "twice";
        EXPECT_EQ(a.peer_stage, -1);
        const int virtual_stage = a.chunk * p + s;
        const bool needs_before = forward ? virtual_stage > 0 : virtual_stage < p * V - 1;
        const bool needs_after = forward ? virtual_stage < p * V - 1 : virtual_stage > 0;
        const PipeOp before = forward ? PipeOp::recv_activation : PipeOp::recv_gradient;
        const PipeOp after = forward ? PipeOp::send_activation : PipeOp::send_gradient;
        const int before_peer = forward ? (s + p - 1) % p : (s + 1) % p;
        const int after_peer = forward ? (s + 1) % p : (s + p - 1) % p;
        if (needs_before) {
          ASSERT_GT(i, 0u);
          EXPECT_EQ(actions[i - 1], (PipeAction{before, a.micro_batch, a.chunk, before_peer}));
        }
        if (needs_after) {
          ASSERT_LT(i + 1, actions.size());
          EXPECT_EQ(actions[i + 1], (PipeAction{after, a.micro_batch, a.chunk, after_peer}));
        }
      }
      ASSERT_EQ(forward_at.size(), static_cast<size_t>(m * V));
      ASSERT_EQ(backward_at.size(), static_cast<size_t>(m * V));
      for (const auto& [key, at] : forward_at) EXPECT_LT(at, backward_at.at(key));
      // Only zb-h1 splits its backwards: every one has its weight pass after it, in micro-batch order.
      ASSERT_EQ(weight_at.size(), c.kind == Kind::zb_h1 ? static_cast<size_t>(m * V) : 0u);
      int previous_weight = -1;
      for (const auto& [key, at] : weight_at) {
        EXPECT_LT(backward_at.at(key), at);
        EXPECT_LT(previous_weight, at);
        previous_weight = at;
      }
      // Receives and sends: 2 per (micro, chunk) and direction, minus the ends of the pipeline.
      const size_t ends = (s == 0 ? 1 : 0) + (s == p - 1 ? 1 : 0);  // virtual stage 0 / p V - 1 live here
      EXPECT_EQ(communication, static_cast<size_t>(m) * (2 * (2 * V - ends)));
    }
  }
}

// Activations held (forward done, backward not; zb-h1: weight pass not), in (micro, chunk) units. Interleaved bound
// asserted (Megatron's warm-up + 1, capped at m V): each chunk is 1/V of the stage's layers, so it
// is at most p + (p - 1)/V stages' worth on stage 0, against 1F1B's p.
TEST(PipelineSchedule, PeakActivations) {
  for (const ScheduleCase& c : allowed_cases()) {
    const int p = c.shape.stages, m = c.shape.micro_batches, V = c.shape.virtual_stages;
    for (int s = 0; s < p; ++s) {
      SCOPED_TRACE(c.name() + " stage " + std::to_string(s));
      const int peak = peak_activations(make_pipeline_schedule(c.kind, c.shape, s));
      switch (c.kind) {
        case Kind::gpipe: EXPECT_EQ(peak, m); break;
        case Kind::one_f_one_b:
          EXPECT_EQ(peak, std::min(p - s, m));
          EXPECT_LE(peak, p - s);
          break;
        case Kind::interleaved:
          EXPECT_EQ(peak, std::min(2 * (p - s - 1) + (V - 1) * p + 1, m * V));
          EXPECT_LE(peak, p * V + p - 1);  // p + (p - 1)/V stages' worth of activations
          break;
        case Kind::zb_h1:  // held until the weight pass: every stage at 1F1B's stage-0 peak, never above
          EXPECT_EQ(peak, std::min(p, m));
          break;
      }
    }
  }
}

}  // namespace
}  // namespace tessera
