// Run config: defaults, presets + explicit keys, overrides, every error path, TOML round trip, shipped configs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "config/run_config.h"

namespace tessera {
namespace {

const std::string kMinimal = "[data]\ndir = \"data/x\"\n";

RunConfig parse_ok(const std::string& text, const std::vector<std::string>& overrides = {}) {
  auto r = parse_run_config(text, overrides, "test.toml");
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.value() : RunConfig{};
}

std::string parse_err(const std::string& text, const std::vector<std::string>& overrides = {}) {
  auto r = parse_run_config(text, overrides, "test.toml");
  EXPECT_FALSE(r.ok()) << "expected an error for:\n" << text;
  EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
  return r.status().message();
}

#define EXPECT_HAS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

TEST(RunConfig, Defaults) {
  // parallel.dp = 0 (the default) fills the job: the batch is resolved once the world size is known.
  const RunConfig unresolved = parse_ok(kMinimal);
  EXPECT_EQ(unresolved.parallel.dp, 0);
  EXPECT_EQ(unresolved.train.batch_tokens, 0);
  RunConfig c = parse_ok(kMinimal + "[parallel]\ndp = 1\n");
  auto tiny = model_preset("tiny").value();
  EXPECT_EQ(c.model_preset, "tiny");
  EXPECT_EQ(c.model.n_layer, tiny.n_layer);
  EXPECT_EQ(c.model.d_model, tiny.d_model);
  EXPECT_EQ(c.init_weights, "");
  EXPECT_EQ(c.data.dir, "data/x");
  EXPECT_EQ(c.data.seq_len, tiny.max_seq_len);
  EXPECT_EQ(c.train.steps, 100);
  EXPECT_EQ(c.train.micro_batch, 4);
  EXPECT_EQ(c.train.batch_tokens, 4 * tiny.max_seq_len);
  EXPECT_EQ(c.train.grad_accum, 1);
  EXPECT_EQ(c.train.seed, 1337u);
  EXPECT_EQ(c.train.threads, 0);
  EXPECT_EQ(c.train.eval_interval, 50);
  EXPECT_EQ(c.train.eval_batches, 10);
  EXPECT_EQ(c.train.log_interval, 1);
  EXPECT_EQ(c.train.checkpoint_interval, 0);
  EXPECT_EQ(c.train.keep_checkpoints, 2);
  EXPECT_EQ(c.train.out_dir, "runs/default");
  EXPECT_DOUBLE_EQ(c.train.timeout_s, 300);
  EXPECT_FLOAT_EQ(c.optim.lr, 3e-4f);
  EXPECT_FLOAT_EQ(c.optim.min_lr, 3e-5f);
  EXPECT_EQ(c.optim.warmup_steps, 10);
  EXPECT_EQ(c.optim.schedule, LrSchedule::cosine);
  EXPECT_FLOAT_EQ(c.optim.beta1, 0.9f);
  EXPECT_FLOAT_EQ(c.optim.beta2, 0.95f);
  EXPECT_FLOAT_EQ(c.optim.eps, 1e-8f);
  EXPECT_FLOAT_EQ(c.optim.weight_decay, 0.1f);
  EXPECT_FALSE(c.optim.decay_norms_and_biases);
  EXPECT_FALSE(c.optim.decay_embeddings);
  EXPECT_FLOAT_EQ(c.optim.grad_clip, 1.0f);
  EXPECT_EQ(c.parallel.dp, 1);
  EXPECT_EQ(c.parallel.pp, 1);
  EXPECT_EQ(c.parallel.tp, 1);
  EXPECT_DOUBLE_EQ(c.parallel.bucket_mb, 4.0);
}

TEST(RunConfig, ExplicitModelKeysOverridePreset) {
  RunConfig c = parse_ok(kMinimal + "[model]\npreset = \"tiny-llama\"\nn_layer = 3\nd_ff = 96\nnorm_eps = 1e-6\n"
                                    "rope_theta = 500000\ntied_embeddings = true\n"
                                    "init_weights = \"w.safetensors\"\n");
  auto base = model_preset("tiny-llama").value();
  EXPECT_EQ(c.model.arch, Arch::llama);
  EXPECT_EQ(c.model.n_layer, 3);
  EXPECT_EQ(c.model.d_ff, 96);
  EXPECT_EQ(c.model.d_model, base.d_model);
  EXPECT_EQ(c.model.n_kv_head, base.n_kv_head);
  EXPECT_FLOAT_EQ(c.model.norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c.model.rope_theta, 500000.f);  // an integer is accepted for a float key
  EXPECT_TRUE(c.model.tied_embeddings);
  EXPECT_EQ(c.init_weights, "w.safetensors");
}

TEST(RunConfig, Gpt2DerivedKeysFollowExplicitOnes) {
  RunConfig c = parse_ok(kMinimal + "[model]\nd_model = 128\nn_head = 8\n");
  EXPECT_EQ(c.model.d_ff, 4 * 128);
  EXPECT_EQ(c.model.n_kv_head, 8);
  RunConfig d = parse_ok(kMinimal + "[model]\nd_model = 128\nd_ff = 300\n");
  EXPECT_EQ(d.model.d_ff, 300);
}

TEST(RunConfig, GradAccumDerivedFromBatchTokens) {
  RunConfig c = parse_ok("[data]\ndir=\"d\"\nseq_len=32\n[train]\nmicro_batch=2\nbatch_tokens=512\n[parallel]\ndp=2\n");
  EXPECT_EQ(c.train.grad_accum, 4);  // 512 / (2 * 32 * 2)
  RunConfig d = parse_ok("[data]\ndir=\"d\"\nseq_len=32\n[train]\nmicro_batch=2\n[parallel]\ndp=2\n");
  EXPECT_EQ(d.train.batch_tokens, 128);
  EXPECT_EQ(d.train.grad_accum, 1);
}

TEST(RunConfig, MinLrDefaultFollowsLr) {
  RunConfig c = parse_ok(kMinimal, {"optim.lr=1e-3"});
  EXPECT_FLOAT_EQ(c.optim.min_lr, 1e-4f);
  RunConfig d = parse_ok(kMinimal + "[optim]\nlr = 1e-3\nmin_lr = 0.0\n");
  EXPECT_FLOAT_EQ(d.optim.min_lr, 0.f);
}

TEST(RunConfig, OverridesApplied) {
  RunConfig c = parse_ok(kMinimal + "[train]\nsteps = 5\n",
                         {"train.steps=20", "model.n_layer=4", "optim.lr=1e-3", "optim.schedule=linear",
                          "optim.decay_embeddings=true", "train.out_dir=\"runs/x y\"", "data.dir=other",
                          "parallel.bucket_mb=25", "model.preset=tiny-llama", "train.timeout_s=2.5"});
  EXPECT_EQ(c.train.steps, 20);
  EXPECT_EQ(c.model.n_layer, 4);
  EXPECT_EQ(c.model.arch, Arch::llama);
  EXPECT_FLOAT_EQ(c.optim.lr, 1e-3f);
  EXPECT_EQ(c.optim.schedule, LrSchedule::linear);
  EXPECT_TRUE(c.optim.decay_embeddings);
  EXPECT_EQ(c.train.out_dir, "runs/x y");
  EXPECT_EQ(c.data.dir, "other");
  EXPECT_DOUBLE_EQ(c.parallel.bucket_mb, 25);
  EXPECT_DOUBLE_EQ(c.train.timeout_s, 2.5);
  // Later overrides win.
  EXPECT_EQ(parse_ok(kMinimal, {"train.steps=3", "train.steps=7"}).train.steps, 7);
}

TEST(RunConfig, UnknownKeyInEveryTableSuggestsClosest) {
  struct Case { const char* section; const char* typo; const char* suggestion; };
  for (Case k : {Case{"model", "n_layers", "n_layer"}, {"data", "seqlen", "seq_len"}, {"train", "stpes", "steps"},
                 {"optim", "weight_decy", "weight_decay"}, {"parallel", "dpp", "dp"}}) {
    std::string text = kMinimal + "[" + k.section + "]\n" + k.typo + " = 1\n";
    if (std::string(k.section) == "data") text = "[data]\ndir = \"x\"\n" + std::string(k.typo) + " = 1\n";
    std::string m = parse_err(text);
    const std::string section = k.section, typo = k.typo, suggestion = k.suggestion;
    EXPECT_HAS(m, "unknown key '" + typo + "' in [" + section + "]");
    EXPECT_HAS(m, "did you mean '" + suggestion + "'");
    EXPECT_HAS(m, "allowed keys in [" + section + "]");
    EXPECT_HAS(m, "test.toml:");
  }
  // Nothing close: the list of allowed keys, no suggestion.
  std::string m = parse_err(kMinimal + "[train]\nzzzzzzzzzzzz = 1\n");
  EXPECT_EQ(m.find("did you mean"), std::string::npos) << m;
  EXPECT_HAS(m, "micro_batch");
}

TEST(RunConfig, UnknownSectionAndTopLevelKey) {
  std::string m = parse_err(kMinimal + "[optimizer]\nlr = 1.0\n");
  EXPECT_HAS(m, "unknown section [optimizer]");
  EXPECT_HAS(m, "did you mean 'optim'");
  EXPECT_HAS(m, "allowed sections: model, data, train, optim, parallel");
  m = parse_err("steps = 3\n" + kMinimal);
  EXPECT_HAS(m, "key 'steps' is outside any section; it belongs in [train]");
  m = parse_err("train = 3\n" + kMinimal);
  EXPECT_HAS(m, "'train' must be a table");
}

TEST(RunConfig, WrongTypeNamesKeyExpectedAndGot) {
  std::string m = parse_err(kMinimal + "[train]\nsteps = \"many\"\n");
  EXPECT_HAS(m, "train.steps must be integer, got string");
  EXPECT_HAS(m, "test.toml:4");
  m = parse_err(kMinimal + "[train]\nsteps = 2.5\n");
  EXPECT_HAS(m, "train.steps must be integer, got float");
  m = parse_err(kMinimal + "[optim]\nlr = \"1e-3\"\n");
  EXPECT_HAS(m, "optim.lr must be float, got string");
  m = parse_err(kMinimal + "[model]\ntied_embeddings = 1\n");
  EXPECT_HAS(m, "model.tied_embeddings must be boolean, got integer");
  m = parse_err("[data]\ndir = [\"a\"]\n");
  EXPECT_HAS(m, "data.dir must be string, got array");
}

TEST(RunConfig, BadEnumValues) {
  EXPECT_HAS(parse_err(kMinimal + "[optim]\nschedule = \"cos\"\n"), "\"cosine\", \"linear\" or \"constant\"");
  EXPECT_HAS(parse_err(kMinimal + "[model]\narch = \"bert\"\n"), "unknown architecture 'bert'");
  std::string m = parse_err(kMinimal + "[model]\npreset = \"huge\"\n");
  EXPECT_HAS(m, "model.preset");
  EXPECT_HAS(m, "available: tiny");
}

TEST(RunConfig, BatchTokensNotDivisible) {
  std::string m = parse_err("[data]\ndir=\"d\"\nseq_len=64\n[train]\nmicro_batch=4\nbatch_tokens=1000\n[parallel]\ndp=1\n");
  EXPECT_HAS(m, "train.batch_tokens (1000)");
  EXPECT_HAS(m, "train.micro_batch (4)");
  EXPECT_HAS(m, "data.seq_len (64)");
  EXPECT_HAS(m, "parallel.dp (1)");
  EXPECT_HAS(m, "= 256");
  EXPECT_HAS(m, "try batch_tokens = 768 or 1024");
  m = parse_err("[data]\ndir=\"d\"\nseq_len=64\n[train]\nmicro_batch=4\nbatch_tokens=100\n[parallel]\ndp=1\n");
  EXPECT_HAS(m, "try batch_tokens = 256");
  // dp counts: 512 is fine for dp=1 but not for dp=3.
  m = parse_err("[data]\ndir=\"d\"\nseq_len=64\n[train]\nmicro_batch=4\nbatch_tokens=512\n[parallel]\ndp=3\n");
  EXPECT_HAS(m, "parallel.dp (3)");
}

TEST(RunConfig, HeadsMustDivideWidth) {
  std::string m = parse_err(kMinimal + "[model]\nn_head = 3\n");
  EXPECT_HAS(m, "n_head (3) must divide d_model (64)");
  EXPECT_HAS(m, "preset 'tiny'");
  m = parse_err(kMinimal + "[model]\npreset = \"tiny-llama\"\nn_kv_head = 3\n");
  EXPECT_HAS(m, "n_kv_head (3) must divide n_head (4)");
}

TEST(RunConfig, SeqLenAboveMaxSeqLen) {
  std::string m = parse_err("[data]\ndir = \"d\"\nseq_len = 65\n");
  EXPECT_HAS(m, "data.seq_len (65) must be <= model.max_seq_len (64)");
  // Raising max_seq_len makes it valid.
  EXPECT_EQ(parse_ok("[data]\ndir = \"d\"\nseq_len = 65\n", {"model.max_seq_len=128"}).data.seq_len, 65);
}

TEST(RunConfig, RangeAndConsistencyErrors) {
  EXPECT_HAS(parse_err(kMinimal + "[train]\nsteps = 0\n"), "train.steps must be >= 1");
  EXPECT_HAS(parse_err(kMinimal + "[train]\nmicro_batch = -1\n"), "train.micro_batch must be >= 1");
  EXPECT_HAS(parse_err(kMinimal + "[optim]\nlr = 0.0\n"), "optim.lr must be > 0");
  EXPECT_HAS(parse_err(kMinimal + "[optim]\nlr = 1e-3\nmin_lr = 1e-2\n"), "optim.min_lr (0.01) must be in [0, optim.lr");
  EXPECT_HAS(parse_err(kMinimal + "[optim]\nbeta2 = 1.0\n"), "optim.beta2 must be in [0, 1)");
  EXPECT_HAS(parse_err(kMinimal + "[optim]\ngrad_clip = -1.0\n"), "optim.grad_clip must be >= 0");
  EXPECT_HAS(parse_err(kMinimal + "[parallel]\ndp = -1\n"), "parallel.dp must be >= 0");
  EXPECT_HAS(parse_err(kMinimal + "[train]\nthreads = -2\n"), "train.threads must be in [0, 4096]");
  EXPECT_HAS(parse_err(kMinimal + "[train]\ntimeout_s = 0\n"), "train.timeout_s must be > 0");
}

TEST(RunConfig, DataDirRequired) {
  std::string m = parse_err("[train]\nsteps = 3\n");
  EXPECT_HAS(m, "[data] dir is required");
}

TEST(RunConfig, SyntaxErrorHasLine) {
  std::string m = parse_err(kMinimal + "[train\nsteps = 3\n");
  EXPECT_HAS(m, "test.toml:3:");
  EXPECT_HAS(m, "TOML syntax error");
}

TEST(RunConfig, BadOverrides) {
  EXPECT_HAS(parse_err(kMinimal, {"train.steps"}), "override 'train.steps': expected section.key=value");
  EXPECT_HAS(parse_err(kMinimal, {"steps=3"}), "expected section.key=value");
  EXPECT_HAS(parse_err(kMinimal, {".steps=3"}), "expected section.key=value");
  std::string m = parse_err(kMinimal, {"train.stesp=3"});
  EXPECT_HAS(m, "override 'train.stesp=3'");
  EXPECT_HAS(m, "did you mean 'steps'");
  m = parse_err(kMinimal, {"trian.steps=3"});
  EXPECT_HAS(m, "unknown section [trian]");
  EXPECT_HAS(m, "did you mean 'train'");
  m = parse_err(kMinimal, {"train.steps=abc"});
  EXPECT_HAS(m, "override 'train.steps=abc': steps expects integer, got 'abc'");
  EXPECT_HAS(parse_err(kMinimal, {"train.steps=1.5"}), "expects integer");
  EXPECT_HAS(parse_err(kMinimal, {"optim.lr=fast"}), "expects float");
  EXPECT_HAS(parse_err(kMinimal, {"optim.decay_embeddings=yes"}), "use true or false");
  // Range errors say the value came from the override.
  EXPECT_HAS(parse_err(kMinimal, {"train.steps=0"}), "override 'train.steps=0': train.steps must be >= 1");
}

TEST(RunConfig, TomlRoundTrip) {
  RunConfig c = parse_ok(kMinimal, {"model.preset=tiny-llama", "model.n_layer=3", "optim.lr=1e-3", "optim.eps=1e-7",
                                    "train.seed=42", "train.out_dir=runs/\"q\"", "parallel.dp=2",
                                    "train.batch_tokens=1024", "optim.schedule=constant",
                                    "model.init_weights=a\\b.safetensors"});
  std::string toml = c.to_toml();
  auto back = parse_run_config(toml, {}, "resolved.toml");
  ASSERT_TRUE(back.ok()) << back.status().to_string() << "\n" << toml;
  EXPECT_TRUE(back.value() == c) << to_json(back.value()).dump(1) << "\nvs\n" << to_json(c).dump(1);
  EXPECT_HAS(toml, "lr = 0.001\n");
  EXPECT_EQ(to_json(c)["train"]["grad_accum"], 2);  // 1024 / (4 * 64 * 2)
  RunConfig other = c;
  other.optim.lr = 2e-3f;
  EXPECT_FALSE(other == c);
}

TEST(RunConfig, PipelineKeysDefaultsTomlAndOverrides) {
  RunConfig d = parse_ok(kMinimal);
  EXPECT_EQ(d.parallel.schedule, PipelineScheduleKind::one_f_one_b);
  EXPECT_EQ(d.parallel.virtual_stages, 1);
  EXPECT_TRUE(d.parallel.stage_layers.empty());
  EXPECT_FALSE(d.parallel.sequence_parallel);
  EXPECT_HAS(d.to_toml(), "\nschedule = \"1f1b\"\n");
  EXPECT_HAS(d.to_toml(), "\nstage_layers = []\n");
  EXPECT_EQ(to_json(d)["parallel"]["stage_layers"], nlohmann::json::array());

  RunConfig c = parse_ok(kMinimal + "[parallel]\nschedule = \"interleaved\"\nvirtual_stages = 2\n"
                                    "stage_layers = [2, 3, 3]\nsequence_parallel = true\n");
  EXPECT_EQ(c.parallel.schedule, PipelineScheduleKind::interleaved);
  EXPECT_EQ(c.parallel.virtual_stages, 2);
  EXPECT_EQ(c.parallel.stage_layers, (std::vector<int64_t>{2, 3, 3}));
  EXPECT_TRUE(c.parallel.sequence_parallel);
  EXPECT_HAS(c.to_toml(), "\nstage_layers = [2, 3, 3]\n");
  EXPECT_EQ(to_json(c)["parallel"]["stage_layers"], nlohmann::json::parse("[2, 3, 3]"));
  auto back = parse_run_config(c.to_toml(), {}, "resolved.toml");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_TRUE(back.value() == c);

  // Overrides: bracketed, bare, spaced, empty; an override replaces the file's list.
  for (const char* o : {"parallel.stage_layers=[2,3,3]", "parallel.stage_layers=2,3,3", "parallel.stage_layers=[ 2, 3 ,3 ]"})
    EXPECT_EQ(parse_ok(kMinimal, {o}).parallel.stage_layers, (std::vector<int64_t>{2, 3, 3})) << o;
  EXPECT_EQ(parse_ok(kMinimal, {"parallel.stage_layers=4"}).parallel.stage_layers, (std::vector<int64_t>{4}));
  EXPECT_TRUE(parse_ok(kMinimal + "[parallel]\nstage_layers = [1]\n", {"parallel.stage_layers=[]"}).parallel.stage_layers.empty());
  RunConfig o = parse_ok(kMinimal, {"parallel.schedule=gpipe", "parallel.virtual_stages=3",
                                    "parallel.sequence_parallel=true"});
  EXPECT_EQ(o.parallel.schedule, PipelineScheduleKind::gpipe);
  EXPECT_EQ(o.parallel.virtual_stages, 3);
  EXPECT_TRUE(o.parallel.sequence_parallel);
}

TEST(RunConfig, PipelineKeyErrors) {
  // A bad element names its index and the rule.
  std::string m = parse_err(kMinimal + "[parallel]\nstage_layers = [2, 0, 3]\n");
  EXPECT_HAS(m, "test.toml:4: parallel.stage_layers[1] must be >= 1 (got 0): only the last virtual stage may hold no layers");
  // The last may: the final norm and head alone.
  EXPECT_EQ(parse_ok(kMinimal + "[parallel]\nstage_layers = [2, 3, 0]\n").parallel.stage_layers, (std::vector<int64_t>{2, 3, 0}));
  m = parse_err(kMinimal + "[parallel]\nstage_layers = [2, \"x\"]\n");
  EXPECT_HAS(m, "parallel.stage_layers[1] must be integer, got string");
  m = parse_err(kMinimal + "[parallel]\nstage_layers = [2, 1.5]\n");
  EXPECT_HAS(m, "parallel.stage_layers[1] must be integer, got float");
  m = parse_err(kMinimal + "[parallel]\nstage_layers = 3\n");
  EXPECT_HAS(m, "parallel.stage_layers must be array of integers, got integer");
  m = parse_err(kMinimal, {"parallel.stage_layers=2,x"});
  EXPECT_HAS(m, "override 'parallel.stage_layers=2,x': stage_layers expects array of integers");
  EXPECT_HAS(m, "[2,3,3] or 2,3,3");
  EXPECT_HAS(parse_err(kMinimal, {"parallel.stage_layers=[2,3"}), "expects array of integers");
  EXPECT_HAS(parse_err(kMinimal, {"parallel.stage_layers=2,,3"}), "expects array of integers");
  EXPECT_HAS(parse_err(kMinimal, {"parallel.stage_layers=2,"}), "expects array of integers");
  EXPECT_HAS(parse_err(kMinimal, {"parallel.stage_layers=[1,-1]"}),
             "override 'parallel.stage_layers=[1,-1]': parallel.stage_layers[1] must be >= 0 (got -1)");
  // A schedule name that is not one gets the list and, when close, a suggestion.
  m = parse_err(kMinimal + "[parallel]\nschedule = \"1F1B\"\n");
  EXPECT_HAS(m, "test.toml:4: parallel.schedule: unknown pipeline schedule '1F1B'");
  EXPECT_HAS(m, "\"gpipe\", \"1f1b\", \"interleaved\" or \"zb-h1\"");
  EXPECT_HAS(m, "did you mean '1f1b'?");
  EXPECT_HAS(parse_err(kMinimal, {"parallel.schedule=interleave"}), "did you mean 'interleaved'?");
  EXPECT_EQ(parse_err(kMinimal, {"parallel.schedule=zzzzzzzzzz"}).find("did you mean"), std::string::npos);
  EXPECT_HAS(parse_err(kMinimal + "[parallel]\nvirtual_stages = 0\n"), "parallel.virtual_stages must be >= 1 (got 0)");
  EXPECT_HAS(parse_err(kMinimal, {"parallel.sequence_parallel=1"}), "use true or false");
}

TEST(RunConfig, LoadFileAndMissingFile) {
  auto missing = load_run_config("/nonexistent/cfg.toml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::not_found);
  EXPECT_HAS(missing.status().message(), "/nonexistent/cfg.toml");
}

TEST(RunConfig, ShippedConfigsParse) {
  const std::string dir = std::string(TESSERA_SOURCE_DIR) + "/configs/";
  auto def = load_run_config_for_world(dir + "default.toml", {}, 1);
  ASSERT_TRUE(def.ok()) << def.status().to_string();
  // The README's default job: BPE-4096 KJV data, and a vocabulary that matches it.
  EXPECT_EQ(def->model_preset, "kjv-bpe");
  EXPECT_EQ(def->model.vocab_size, 4096);
  EXPECT_EQ(def->data.dir, "data/kjv-bpe");
  EXPECT_LE(def->data.seq_len, def->model.max_seq_len);
  EXPECT_EQ(def->train.grad_accum, 1);
  EXPECT_GT(def->train.eval_interval, 0);
  auto byte = load_run_config_for_world(dir + "kjv_byte.toml", {}, 1);
  ASSERT_TRUE(byte.ok()) << byte.status().to_string();
  EXPECT_EQ(byte->model.vocab_size, 256);
  EXPECT_EQ(byte->data.dir, "data/kjv");
  for (const char* name : {"default.toml", "kjv_byte.toml", "tiny.toml", "gpt2_finetune.toml", "llama_small.toml"}) {
    auto r = load_run_config_for_world(dir + name, {}, 1);  // as `tessera train` on one process
    EXPECT_TRUE(r.ok()) << name << ": " << r.status().to_string();
    if (!r.ok()) continue;
    // The config.toml a run writes into its directory parses back to the same config.
    auto back = parse_run_config(r->to_toml(), {}, "config.toml");
    ASSERT_TRUE(back.ok()) << name << ": " << back.status().to_string() << "\n" << r->to_toml();
    EXPECT_TRUE(back.value() == r.value()) << name;
  }
  auto ft = load_run_config_for_world(dir + "gpt2_finetune.toml", {}, 1);
  ASSERT_TRUE(ft.ok());
  EXPECT_FALSE(ft->init_weights.empty());
  EXPECT_EQ(ft->train.grad_accum, 4);
  auto llama = load_run_config_for_world(dir + "llama_small.toml", {}, 1);
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(llama->model.arch, Arch::llama);
  EXPECT_EQ(llama->model.n_kv_head, 2);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// parallel.dp = 0 fills the job: the global batch (batch_tokens) stays, grad_accum follows dp.
TEST(RunConfig, AutoDataParallelFillsTheWorld) {
  const std::string path = ::testing::TempDir() + "/auto_dp.toml";
  {
    std::ofstream f(path);
    f << "[data]\ndir = \"data/x\"\nseq_len = 16\n[train]\nmicro_batch = 1\nbatch_tokens = 192\n"
         "[parallel]\ndp = 0\n";
  }
  auto four = load_run_config_for_world(path, {}, 4);
  ASSERT_TRUE(four.ok()) << four.status().to_string();
  EXPECT_EQ(four->parallel.dp, 4);
  EXPECT_EQ(four->train.grad_accum, 3);
  auto three = load_run_config_for_world(path, {}, 3);
  ASSERT_TRUE(three.ok()) << three.status().to_string();
  EXPECT_EQ(three->parallel.dp, 3);
  EXPECT_EQ(three->train.grad_accum, 4);
  EXPECT_EQ(three->train.batch_tokens, 192);
  auto odd = load_run_config_for_world(path, {"parallel.tp=2"}, 3);
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("not a multiple of parallel.tp x parallel.pp = 2"), std::string::npos)
      << odd.status().message();
  // An explicit dp is left alone (the layout check names a mismatch with the world later).
  auto fixed = load_run_config_for_world(path, {"parallel.dp=2", "train.batch_tokens=64"}, 4);
  ASSERT_TRUE(fixed.ok()) << fixed.status().to_string();
  EXPECT_EQ(fixed->parallel.dp, 2);
}

}  // namespace
}  // namespace tessera
