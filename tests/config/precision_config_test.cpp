// train.precision: fp32 by default, bf16 / fp16 accepted and parsed by parse_precision, anything
// else refused naming the choices, and a change on --resume flagged (it changes the numerics).
#include <gtest/gtest.h>

#include "model/precision.h"
#include "config/run_config.h"
#include "config/run_config_schema.h"

namespace tessera {
namespace {

const std::string kMinimal = "[data]\ndir = \"data/x\"\n";

TEST(PrecisionConfig, DefaultsToFp32AndAcceptsTheThreeNames) {
  auto d = parse_run_config(kMinimal, {}, "test.toml");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->train.precision, Precision::fp32);
  for (const char* name : {"fp32", "bf16", "fp16"}) {
    auto r = parse_run_config(kMinimal, {std::string("train.precision=") + name}, "test.toml");
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(precision_name(r->train.precision), name);
    auto t = parse_run_config(kMinimal + "[train]\nprecision = \"" + name + "\"\n", {}, "test.toml");
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_EQ(precision_name(t->train.precision), name);
  }
}

TEST(PrecisionConfig, RejectsUnknownPrecision) {
  auto r = parse_run_config(kMinimal, {"train.precision=fp8"}, "test.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("precision"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("bf16"), std::string::npos) << r.status().message();
}

TEST(PrecisionConfig, ChangeOnResumeIsFlagged) {
  const auto saved = to_json(parse_run_config(kMinimal, {}, "test.toml").value());
  const auto now = to_json(parse_run_config(kMinimal, {"train.precision=bf16"}, "test.toml").value());
  EXPECT_EQ(describe_resume_changes(saved, now), "train.precision \"fp32\" -> \"bf16\"");
}

}  // namespace
}  // namespace tessera
