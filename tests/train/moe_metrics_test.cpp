// The expert-load metrics of a MoE model: a layer's routing summed into tokens per expert, dropped
// assignments, entropy and the largest share, and the router-collapse warning naming layer, expert
// and the key to change; the end-of-run report over the logged steps naming the imbalanced layers
// and the busiest ep rank, its metrics event, and the timeline's counter tracks.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "../world_of_one.h"
#include "model/config.h"
#include "train/moe_metrics.h"
#include "train/moe_report.h"

namespace tessera {
namespace {

TEST(MoeMetrics, SumsTheLayersAndWarnsAboveTheShare) {
  ModelConfig cfg = model_preset("tiny-moe").value();  // 2 MoE layers, 4 experts, top-2
  // Two forwards of layer 1 (as two micro-batches would give), 6 tokens each.
  Transformer::MoeLayerLoad l1;
  l1.layer = 1;
  l1.tokens = {8, 6, 2, 0};
  l1.routed = {12, 8, 4, 0};  // 24 assignments = 12 tokens x top-2; expert 0 takes every token
  l1.dropped = 8;
  l1.entropy_sum = 2.0;
  l1.forwards = 2;
  auto load = gather_moe_load(testing::world_of_one(), cfg, {l1});
  ASSERT_TRUE(load.ok()) << load.status().to_string();
  ASSERT_EQ(load->size(), 2u);  // layer 0 too (no forwards here: zeros)
  const MoeLoadSummary& s = (*load)[1];
  EXPECT_EQ(s.layer, 1);
  EXPECT_EQ(s.tokens, (std::vector<int64_t>{8, 6, 2, 0}));
  EXPECT_EQ(s.dropped, 8);
  EXPECT_DOUBLE_EQ(s.entropy, 1.0);
  EXPECT_DOUBLE_EQ(s.max_share, 1.0);
  EXPECT_EQ(s.max_expert, 0);
  EXPECT_EQ((*load)[0].max_share, 0);
  const nlohmann::json j = moe_load_json(*load);
  EXPECT_EQ(j[1]["tokens"], nlohmann::json({8, 6, 2, 0}));
  EXPECT_EQ(j[1]["dropped"], 8);

  const auto warnings = moe_collapse_warnings(*load, 0.9, 7);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("step 7: MoE layer 1: expert 0"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("model.moe_aux_loss"), std::string::npos) << warnings[0];
  EXPECT_TRUE(moe_collapse_warnings(*load, 0, 7).empty());  // 0 = off
}

MoeLoadSummary layer_load(int layer, std::vector<int64_t> routed, std::vector<int64_t> kept, int64_t dropped,
                          double entropy, double max_share = 0.5, int max_expert = 0) {
  MoeLoadSummary s;
  s.max_share = max_share;
  s.max_expert = max_expert;
  s.layer = layer;
  s.routed = std::move(routed);
  s.tokens = std::move(kept);
  s.dropped = dropped;
  s.entropy = entropy;
  return s;
}

TEST(MoeReport, NamesImbalancedLayersAndTheBusiestEpRank) {
  MoeRunLoad run;
  // Layer 1 balanced; layer 3: expert 2 takes 40 % of the assignments in both steps, and ep rank 1
  // (experts 2-3) computes 60 % of the kept rows.
  run.add({layer_load(1, {25, 25, 25, 25}, {25, 25, 25, 25}, 0, 1.3), layer_load(3, {20, 20, 40, 20}, {20, 20, 40, 20}, 2, 1.0)}, 5);
  run.add({layer_load(1, {26, 24, 25, 25}, {26, 24, 25, 25}, 0, 1.1), layer_load(3, {20, 20, 40, 20}, {20, 20, 40, 20}, 4, 0.8)}, 10);
  ASSERT_EQ(run.steps, 2);
  const auto balance = moe_layer_balance(run, 2, 0.9);
  ASSERT_EQ(balance.size(), 2u);
  EXPECT_FALSE(balance[0].imbalanced());
  EXPECT_TRUE(balance[1].uneven);
  EXPECT_FALSE(balance[1].collapsed);
  EXPECT_EQ(balance[1].busiest_expert, 2);
  EXPECT_DOUBLE_EQ(balance[1].expert_share[2], 0.4);
  EXPECT_EQ(balance[1].busiest_rank, 1);
  EXPECT_DOUBLE_EQ(balance[1].rank_share[1], 0.6);
  EXPECT_EQ(balance[1].dropped, 6);
  EXPECT_DOUBLE_EQ(balance[1].entropy, 0.9);
  const auto lines = moe_run_report(balance, run.steps, 4, 2);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("1 of 2 MoE layer(s) imbalanced"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("layer 3: expert 2 routed 40% of the assignments (even 25%), 6 dropped"), std::string::npos)
      << lines[1];
  EXPECT_NE(lines[1].find("ep rank 1 (experts 2-3) computed 60% of the expert rows (even 50%)"), std::string::npos)
      << lines[1];
  const nlohmann::json j = moe_run_report_json(balance, run.steps);
  EXPECT_EQ(j["event"], "moe_report");
  EXPECT_EQ(j["layers"][1]["uneven"], true);
  EXPECT_EQ(j["layers"][1]["rank_share"][1], 0.6);
  // Without ep no rank is named, and a balanced run lists no layer.
  EXPECT_EQ(moe_run_report(moe_layer_balance(run, 1, 0.9), run.steps, 4, 1)[1].find("ep rank"), std::string::npos);
  MoeRunLoad even;
  even.add({layer_load(0, {5, 5, 5, 5}, {5, 5, 5, 5}, 0, 1.38)}, 1);
  EXPECT_EQ(moe_run_report(moe_layer_balance(even, 2, 0.9), 1, 4, 2).size(), 1u);
  // A collapse in one logged step is named even when the run's totals even out.
  even.add({layer_load(0, {10, 0, 5, 5}, {10, 0, 5, 5}, 0, 0.9, /*max_share=*/0.97, /*max_expert=*/0)}, 7);
  even.add({layer_load(0, {0, 10, 5, 5}, {0, 10, 5, 5}, 0, 0.9, 0.5, 1)}, 8);
  const auto collapsed = moe_layer_balance(even, 2, 0.9);
  EXPECT_FALSE(collapsed[0].uneven);
  EXPECT_TRUE(collapsed[0].collapsed);
  const auto lines2 = moe_run_report(collapsed, even.steps, 4, 2);
  ASSERT_EQ(lines2.size(), 2u);
  EXPECT_NE(lines2[1].find("at step 7 expert 0 was routed 97% of the tokens"), std::string::npos) << lines2[1];
  EXPECT_TRUE(moe_layer_balance(even, 2, 0).front().imbalanced() == false);  // warnings off: totals only
}

TEST(MoeReport, TimelineGetsACounterTrackPerLayer) {
  Timeline on(true, 0), off(false, 0);
  const std::vector<MoeLoadSummary> step = {layer_load(1, {3, 1}, {3, 1}, 0, 0.5)};
  add_moe_counters(on, 1.0, step);
  add_moe_counters(off, 1.0, step);
  const std::string path = ::testing::TempDir() + "moe_counters.json";
  ASSERT_TRUE(on.write_rank_file(path).ok());
  std::ifstream in(path + ".rank0");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("MoE layer 1 tokens"), std::string::npos) << text;
  EXPECT_NE(text.find("expert 0"), std::string::npos) << text;
  EXPECT_NE(text.find("entropy"), std::string::npos) << text;
  std::remove((path + ".rank0").c_str());
}

}  // namespace
}  // namespace tessera
