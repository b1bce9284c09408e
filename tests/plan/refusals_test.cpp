// The refusal table (plan/refusals.h): every row is reached by a config that shows it, the error
// quotes the config's values and the row's reason and fix, plan_parallel_layout refuses it, and
// the Markdown the config reference prints has one row per refusal.
#include <gtest/gtest.h>

#include <set>

#include "config/run_config.h"
#include "plan/parallel_layout.h"
#include "plan/refusals.h"

namespace tessera {
namespace {

const std::string kMinimal = "[data]\ndir = \"data/x\"\n[parallel]\ndp = 1\n";

RunConfig config(const std::vector<std::string>& overrides) {
  auto r = parse_run_config(kMinimal, overrides, "test.toml");
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.value() : RunConfig{};
}

struct Case {
  std::vector<std::string> overrides;
  std::string message_starts;  // the instance: keys = values in the row's order
};

// One config per row, in table order; a new row without a case here fails RowsAllReached.
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {{"train.precision=fp16", "parallel.zero=2"}, "train.precision = \"fp16\" with parallel.zero = 2"},
      {{"parallel.zero=3", "parallel.tp=2", "parallel.sequence_parallel=true"},
       "parallel.zero = 3 with parallel.sequence_parallel = true"},
      {{"parallel.mode=ps", "parallel.zero=1"}, "parallel.mode = \"ps\" with parallel.zero = 1"},
      {{"parallel.mode=ps", "comm.compression=powersgd"}, "parallel.mode = \"ps\" with comm.compression = \"powersgd\""},
      {{"parallel.mode=ps", "train.precision=fp16"}, "parallel.mode = \"ps\" with train.precision = \"fp16\""},
      {{"train.local_steps=4", "parallel.mode=ps"}, "train.local_steps = 4 with parallel.mode = \"ps\""},
      {{"train.local_steps=4", "parallel.zero=1"}, "train.local_steps = 4 with parallel.zero = 1"},
      {{"comm.compression=topk", "parallel.zero=1"}, "comm.compression = \"topk\" with parallel.zero = 1"},
      {{"comm.compression=bf16", "parallel.zero=1", "train.precision=fp16"},
       "comm.compression = \"bf16\" with parallel.zero = 1 and train.precision = \"fp16\""},
      {{"comm.compression=onebit", "train.precision=fp16"},
       "comm.compression = \"onebit\" with train.precision = \"fp16\""},
      {{"ps.spare_workers=1"}, "ps.spare_workers = 1 with parallel.mode = \"allreduce\""},
      {{"parallel.mode=ps", "ps.spare_workers=1"}, "ps.spare_workers = 1 with ps.consistency = \"sync\""},
      {{"parallel.mode=ps", "ps.consistency=async", "ps.spare_workers=1", "parallel.tp=2"},
       "ps.spare_workers = 1 with parallel.tp = 2 and parallel.pp = 1"},
      {{"parallel.mode=ps", "ps.consistency=ssp", "ps.spare_workers=2", "comm.compression=bf16"},
       "ps.spare_workers = 2 with comm.compression = \"bf16\""},
      {{"parallel.mode=ps", "ps.consistency=async", "ps.spare_workers=1", "train.sample_ledger=true"},
       "ps.spare_workers = 1 with train.sample_ledger = true"},
      {{"train.on_anomaly=rollback", "parallel.mode=ps", "train.checkpoint_interval=5"},
       "train.on_anomaly = \"rollback\" with parallel.mode = \"ps\""},
      {{"train.on_anomaly=skip_step", "comm.compression=topk"},
       "train.on_anomaly = \"skip_step\" with comm.compression = \"topk\""},
      {{"train.on_anomaly=rollback"}, "train.on_anomaly = \"rollback\" with train.checkpoint_interval = 0"},
      {{"model.preset=tiny-moe", "parallel.tp=2", "parallel.sequence_parallel=true"},
       "model.moe_experts = 4 with parallel.sequence_parallel = true"},
      {{"comm.compression=bf16", "train.local_steps=2"}, "comm.compression = \"bf16\" with train.local_steps = 2"},
      {{"parallel.cp=2", "parallel.mode=ps"}, "parallel.cp = 2 with parallel.mode = \"ps\""},
      {{"parallel.cp=2", "train.local_steps=2"}, "parallel.cp = 2 with train.local_steps = 2"},
      {{"parallel.cp=2", "comm.compression=bf16"}, "parallel.cp = 2 with comm.compression = \"bf16\""},
      {{"parallel.cp=2", "model.preset=tiny-moe", "model.moe_capacity_factor=1.5"},
       "parallel.cp = 2 with model.moe_capacity_factor = 1.5"},
      {{"parallel.ep=2", "model.preset=tiny-moe", "parallel.mode=ps"}, "parallel.ep = 2 with parallel.mode = \"ps\""},
      {{"parallel.ep=2", "model.preset=tiny-moe", "train.local_steps=2"}, "parallel.ep = 2 with train.local_steps = 2"},
      {{"parallel.ep=2", "model.preset=tiny-moe", "comm.compression=bf16"},
       "parallel.ep = 2 with comm.compression = \"bf16\""},
      {{"parallel.ep=2", "model.preset=tiny-moe", "parallel.cp=2"}, "parallel.ep = 2 with parallel.cp = 2"},
      {{"parallel.schedule=zb-h1", "parallel.pp=2", "train.recompute=selective"},
       "parallel.schedule = \"zb-h1\" with train.recompute = \"selective\""},
      {{"parallel.schedule=zb-h1", "parallel.pp=2", "parallel.tp=2", "parallel.sequence_parallel=true"},
       "parallel.schedule = \"zb-h1\" with parallel.sequence_parallel = true"},
      {{"parallel.schedule=zb-h1", "parallel.pp=2", "parallel.zero=2"},
       "parallel.schedule = \"zb-h1\" with parallel.zero = 2"},
      {{"parallel.schedule=zb-h1", "parallel.pp=2", "parallel.mode=ps"},
       "parallel.schedule = \"zb-h1\" with parallel.mode = \"ps\""},
      {{"parallel.schedule=zb-h1", "parallel.pp=2", "parallel.cp=2"},
       "parallel.schedule = \"zb-h1\" with parallel.cp = 2"},
      {{"parallel.schedule=zb-h1", "parallel.pp=2", "parallel.ep=2", "model.preset=tiny-moe"},
       "parallel.schedule = \"zb-h1\" with parallel.ep = 2"},
  };
  return c;
}

TEST(Refusals, EachCaseReachesItsRowWithValuesReasonAndFix) {
  const auto rows = refusals();
  ASSERT_EQ(cases().size(), rows.size()) << "one case per refusal row, in table order";
  for (size_t i = 0; i < rows.size(); ++i) {
    const RunConfig cfg = config(cases()[i].overrides);
    const Refusal* hit = first_refusal(cfg);
    ASSERT_NE(hit, nullptr) << rows[i].when;
    EXPECT_EQ(hit, &rows[i]) << "case " << i << " reached '" << hit->when << "' instead of '" << rows[i].when << "'";
    const Status st = check_refusals(cfg);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), StatusCode::invalid_argument);
    EXPECT_EQ(st.message(), cases()[i].message_starts + " is not supported: " + std::string(rows[i].why) + "; " +
                                std::string(rows[i].fix));
  }
}

TEST(Refusals, PlanningRefusesEveryRowBeforeCountingRanks) {
  // World size 1 would also fail the grid check: the refusal must be the error, not the rank count.
  for (const Case& c : cases()) {
    auto r = plan_parallel_layout(config(c.overrides), 1);
    ASSERT_FALSE(r.ok()) << c.message_starts;
    EXPECT_NE(r.status().message().find(c.message_starts + " is not supported"), std::string::npos)
        << r.status().message();
  }
}

TEST(Refusals, SupportedNeighboursAreNotRefused) {
  for (const auto& o : std::vector<std::vector<std::string>>{
           {},
           {"train.precision=fp16", "parallel.zero=1"},
           {"train.on_anomaly=rollback", "train.checkpoint_interval=5", "comm.compression=topk"},
           {"train.on_anomaly=stop", "parallel.mode=ps"},
           {"parallel.zero=1", "parallel.tp=2", "parallel.sequence_parallel=true"},
           {"parallel.mode=ps", "comm.compression=topk"},
           {"parallel.mode=ps", "parallel.tp=2", "parallel.pp=2"},
           {"comm.compression=bf16", "parallel.zero=2"},
           {"comm.compression=bf16", "train.precision=fp16"},
           {"train.local_steps=4", "parallel.tp=2"},
           {"model.preset=tiny-moe", "parallel.pp=2", "parallel.zero=1"}})
    EXPECT_EQ(first_refusal(config(o)), nullptr) << check_refusals(config(o)).to_string();
}

TEST(Refusals, MarkdownHasOneRowPerRefusal) {
  const std::string md = refusals_markdown();
  std::set<std::string> seen;
  for (const Refusal& r : refusals()) {
    EXPECT_NE(md.find("| `" + std::string(r.when) + "` | " + std::string(r.why) + " | "), std::string::npos) << r.when;
    EXPECT_TRUE(seen.insert(std::string(r.when)).second) << "two rows say '" << r.when << "'";
  }
}

}  // namespace
}  // namespace tessera
