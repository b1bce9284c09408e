// Run config schema: every row round-trips through to_toml -> parse and appears in to_json; the resume
// check flags exactly the trajectory keys; unknown keys still get a suggestion.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "model/config_json.h"
#include "config/run_config.h"
#include "config/run_config_schema.h"

namespace tessera {
namespace {

const std::string kMinimal = "[data]\ndir = \"data/x\"\n[parallel]\ndp = 1\n";

// Every TOML key of the schema set away from its default (a new key must be added here: the test says so).
const std::string kEveryKey = R"([model]
preset = "tiny-llama"
arch = "llama"
vocab_size = 300
max_seq_len = 48
n_layer = 3
n_head = 2
n_kv_head = 1
d_model = 32
d_ff = 80
norm_eps = 1e-6
rope_theta = 500000
tied_embeddings = false
moe_experts = 4
moe_top_k = 1
moe_capacity_factor = 1.5
moe_aux_loss = 0.02
moe_z_loss = 0.001
moe_shared_expert = true
moe_every = 2
init_weights = "w \"q\".safetensors"

[data]
dir = "data/y"
seq_len = 24

[train]
steps = 7
local_steps = 3
batch_tokens = 576
micro_batch = 3
seed = 42
threads = 2
moe_warn_share = 0.75
device = "cuda"
cpu_isa = "avx2"
eval_interval = 3
eval_batches = 2
log_interval = 5
checkpoint_interval = 4
keep_checkpoints = 3
out_dir = "runs/every"
timeout_s = 12.5
recompute = "selective"
precision = "bf16"
memory_budget_mb = 1536.5
async_checkpoint = true
sample_ledger = true
on_anomaly = "rollback"
spike_loss_factor = 1.5
spike_grad_factor = 4.0
hardware = "hw.toml"

[optim]
lr = 0.001
min_lr = 0.0002
warmup_steps = 4
schedule = "linear"
beta1 = 0.8
beta2 = 0.99
eps = 1e-7
weight_decay = 0.05
decay_norms_and_biases = true
decay_embeddings = true
grad_clip = 0.5

[parallel]
dp = 2
pp = 2
tp = 2
bucket_mb = 0.25
schedule = "gpipe"
virtual_stages = 3
zero = 2
stage_layers = [1, 2]
sequence_parallel = true
cp = 2
cp_mode = "ring"
ep = 2
layout = "auto"
mode = "ps"

[ps]
servers = 3
consistency = "ssp"
staleness = 5
spare_workers = 1

[outer]
lr = 0.7
momentum = 0.9
nesterov = true

[comm]
compression = "bf16"
topk_ratio = 0.05
powersgd_rank = 2
)";

RunConfig parse_ok(const std::string& text, const std::vector<std::string>& overrides = {}) {
  auto r = parse_run_config(text, overrides, "test.toml");
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.value() : RunConfig{};
}

TEST(RunConfigSchema, EveryRowRoundTripsThroughToml) {
  const RunConfig every = parse_ok(kEveryKey);
  const RunConfig defaults = parse_ok(kMinimal);
  const std::string toml = every.to_toml();
  auto back = parse_run_config(toml, {}, "resolved.toml");
  ASSERT_TRUE(back.ok()) << back.status().to_string() << "\n" << toml;
  const nlohmann::json j = to_json(every);
  for (const SectionSpec& sec : run_config_schema())
    for (const KeySpec& key : sec.keys) {
      const std::string full = std::string(sec.name) + "." + std::string(key.name);
      const nlohmann::json v = key.value.json(every);
      EXPECT_EQ(j[std::string(sec.name)][std::string(key.name)], v) << full << " is missing from to_json";
      EXPECT_EQ(key.value.json(back.value()), v) << full << " changed through to_toml -> parse:\n" << toml;
      if (!key.value.in_toml) continue;
      std::string line = "\n";
      line.append(key.name).append(" = ").append(key.value.toml(every)).append("\n");
      EXPECT_NE(toml.find(line), std::string::npos) << full << " is missing from to_toml:\n" << toml;
      EXPECT_NE(v, key.value.json(defaults)) << full << ": give it a non-default value in kEveryKey";
    }
  EXPECT_TRUE(back.value() == every);
  EXPECT_EQ(back->to_toml(), toml);
}

TEST(RunConfigSchema, JsonOnlyKeysAreNotTomlKeys) {
  EXPECT_EQ(to_json(parse_ok(kEveryKey))["train"]["grad_accum"], 2);  // 576 / (3 * 24 * dp 2 * ep 2)
  for (const char* text : {"[train]\ngrad_accum = 2\n", "[model]\nnum_parameters = 2\n", "[model]\nname = \"x\"\n"}) {
    auto r = parse_run_config(kMinimal + text, {}, "test.toml");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find("unknown key"), std::string::npos) << r.status().message();
  }
}

// The model section's JSON must stay what checkpoints record for the model (model_config_json) plus extras.
TEST(RunConfigSchema, ModelJsonMatchesModelConfigJson) {
  for (const std::string& text : {kMinimal, kEveryKey}) {
    RunConfig c = parse_ok(text);
    const nlohmann::json model = to_json(c)["model"];
    const nlohmann::json arch = model_config_json(c.model);  // named: items() must not outlive it
    for (const auto& [key, value] : arch.items()) EXPECT_EQ(model.at(key), value) << key;
    // preset, name, init_weights, num_parameters; a dense model's checkpoint JSON leaves out the 7 moe_* keys
    EXPECT_EQ(model.size(), arch.size() + 4 + (c.model.is_moe() ? 0 : 7));
  }
}

TEST(RunConfigSchema, UnknownKeyStillSuggests) {
  auto r = parse_run_config(kMinimal + "[train]\nmicro_bach = 2\n", {}, "test.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("did you mean 'micro_batch'"), std::string::npos) << r.status().message();
  r = parse_run_config(kMinimal, {"parallel.bucket_m=2"}, "test.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("did you mean 'bucket_mb'"), std::string::npos) << r.status().message();
}

// The trainer's hand-written list before the schema carried the flag: the reference for "exactly these keys".
std::string legacy_resume_changes(const nlohmann::json& before, const nlohmann::json& now) {
  std::string changed;
  auto check = [&](const std::string& section, const std::string& key) {
    const auto b = before.value(section, nlohmann::json::object()).value(key, nlohmann::json());
    const auto n = now.value(section, nlohmann::json::object()).value(key, nlohmann::json());
    if (b != n) changed += (changed.empty() ? "" : ", ") + section + "." + key + " " + b.dump() + " -> " + n.dump();
  };
  for (const char* key : {"dir", "seq_len"}) check("data", key);
  // micro_batch, grad_accum and parallel.dp only split the global batch (train.batch_tokens): layout.
  for (const char* key : {"seed", "batch_tokens"}) check("train", key);
  check("train", "precision");  // added with the key: reduced precision changes the numerics
  const nlohmann::json optim = now.value("optim", nlohmann::json::object());
  for (const auto& [key, value] : optim.items()) check("optim", key);
  for (const char* key : {"consistency", "staleness"}) check("ps", key);  // added with the parameter server
  check("train", "local_steps");  // added with local SGD, with its outer optimizer:
  for (const char* key : {"lr", "momentum", "nesterov"}) check("outer", key);
  for (const char* key : {"compression", "topk_ratio", "powersgd_rank"}) check("comm", key);  // gradient compression
  // The run's length, which a decaying schedule spreads its decay over.
  const auto steps = now["train"]["steps"];
  if (now["optim"]["schedule"] != "constant" && before["train"]["steps"] != steps)
    changed += (changed.empty() ? "" : ", ") + std::string("train.steps ") + before["train"]["steps"].dump() + " -> " +
               steps.dump() + " (the " + now["optim"]["schedule"].get<std::string>() +
               " learning-rate schedule now decays over " + steps.dump() + " steps)";
  return changed;
}

TEST(RunConfigSchema, ResumeChangesFlagExactlyTheLegacyKeys) {
  const nlohmann::json saved = to_json(parse_ok(kMinimal));
  for (const auto& [section, keys] : saved.items())
    for (const auto& [key, value] : keys.items()) {
      nlohmann::json now = saved;
      now[section][key] = "changed";
      const std::string got = describe_resume_changes(saved, now);
      EXPECT_EQ(got, legacy_resume_changes(saved, now)) << section << "." << key;
    }
  EXPECT_EQ(describe_resume_changes(saved, saved), "");
}

TEST(RunConfigSchema, ResumeChangesNameKeyAndValues) {
  const nlohmann::json saved = to_json(parse_ok(kMinimal));
  std::string got = describe_resume_changes(saved, to_json(parse_ok(kMinimal, {"optim.lr=0.001"})));
  EXPECT_NE(got.find("optim.lr "), std::string::npos) << got;
  EXPECT_NE(got.find("optim.min_lr "), std::string::npos) << got;  // its default follows lr
  // micro_batch 2 with the same global batch doubles grad_accum: the same samples per step.
  got = describe_resume_changes(saved, to_json(parse_ok(kMinimal, {"train.micro_batch=2", "train.batch_tokens=256"})));
  EXPECT_EQ(got, "") << got;
  // A different global batch is a different run.
  got = describe_resume_changes(saved, to_json(parse_ok(kMinimal, {"train.batch_tokens=512"})));
  EXPECT_EQ(got, "train.batch_tokens 256 -> 512") << got;
  got = describe_resume_changes(
      saved, to_json(parse_ok(kMinimal, {"train.out_dir=elsewhere", "train.threads=1",
                                         "train.eval_interval=7", "train.log_interval=3", "parallel.bucket_mb=1"})));
  EXPECT_EQ(got, "") << got;
  // A longer run re-bends a decaying schedule; with a constant learning rate it is only longer.
  got = describe_resume_changes(saved, to_json(parse_ok(kMinimal, {"train.steps=500"})));
  EXPECT_NE(got.find("train.steps 100 -> 500 (the cosine learning-rate schedule now decays over 500 steps)"),
            std::string::npos) << got;
  got = describe_resume_changes(to_json(parse_ok(kMinimal, {"optim.schedule=constant"})),
                                to_json(parse_ok(kMinimal, {"optim.schedule=constant", "train.steps=500"})));
  EXPECT_EQ(got, "") << got;
  // The pipeline / sequence-parallel keys split the work without changing the math.
  got = describe_resume_changes(
      saved, to_json(parse_ok(kMinimal, {"parallel.schedule=interleaved", "parallel.virtual_stages=2",
                                         "parallel.stage_layers=[1,1]", "parallel.sequence_parallel=true"})));
  EXPECT_EQ(got, "") << got;
}

}  // namespace
}  // namespace tessera
