// The expert-load metrics of a MoE model: a layer's routing summed into tokens per expert, dropped
// assignments, entropy and the largest share, and the router-collapse warning naming layer, expert
// and the key to change.
#include <gtest/gtest.h>

#include "../world_of_one.h"
#include "model/config.h"
#include "train/moe_metrics.h"

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

}  // namespace
}  // namespace tessera
