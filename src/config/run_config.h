// Run configuration of a training job: strict TOML ([model] [data] [train] [optim] [parallel]) plus overrides,
// resolved into plain values. Each key is a schema row (run_config_schema.cpp) plus a field below holding its default.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "backend/backend.h"
#include "backend/cpu_isa.h"
#include "core/status.h"
#include "model/config.h"
#include "model/precision.h"
#include "model/recompute.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"
#include "parallel/compression.h"
#include "parallel/param_server_protocol.h"  // PsConsistency
#include "parallel/pipeline_schedule.h"

namespace tessera {

struct DataConfig {
  std::string dir;      // prepared dataset directory (holds manifest.json); required, not checked here
  int64_t seq_len = 0;  // T; defaults to model.max_seq_len, must be <= it
};

struct TrainConfig {
  int64_t steps = 100;
  int64_t local_steps = 0;   // local SGD / DiLoCo: H inner steps between replica syncs; 0 = off
  int64_t batch_tokens = 0;  // global batch in tokens = micro_batch * seq_len * grad_accum * dp
  int64_t micro_batch = 4;   // B per rank per micro-step
  int64_t grad_accum = 1;    // derived: batch_tokens / (micro_batch * seq_len * dp); not a TOML key
  uint64_t seed = 1337;
  int threads = 0;                  // 0 = all cores
  Device device = Device::cpu;      // where every op runs (backend/backend.h)
  CpuIsaRequest cpu_isa = CpuIsaRequest::automatic;  // CPU kernel level: auto | avx2 | avx512 | avx512_bf16 (backend/cpu_isa.h)
  int64_t eval_interval = 50;       // 0 = never evaluate during training
  int64_t eval_batches = 10;
  int64_t log_interval = 1;
  int64_t checkpoint_interval = 0;  // 0 = only at the end
  int64_t keep_checkpoints = 2;
  std::string out_dir = "runs/default";
  double timeout_s = 300;           // collective timeout
  Recompute recompute = Recompute::none;  // activation recomputation: none | selective | full
  Precision precision = Precision::fp32;  // matmul arithmetic: fp32 | bf16 | fp16 (model/precision.h)
  double memory_budget_mb = 0;      // per-rank budget checked before launch; 0 = no limit
  bool async_checkpoint = false;    // write checkpoints in the background (train/async_checkpoint.h)
  bool sample_ledger = false;       // record which step and rank consumed each sample (data/sample_ledger.h)
  std::string on_anomaly = "stop";  // non-finite value or spike: stop | skip_step | rollback | off (train/anomaly_guard.h)
  double spike_loss_factor = 0;     // a loss above this times the recent mean is a spike; 0 = off
  double spike_grad_factor = 0;     // a gradient norm above this times the recent mean is a spike; 0 = off
  double moe_warn_share = 0.9;      // warn when one expert is routed more than this share of a MoE layer's tokens (0 = off)
  // Hardware description (TOML, plan/hardware.h) for the step-time prediction each run prints and for
  // parallel.layout = "auto"; "" = measure this machine briefly at start (plan/calibrate.h).
  std::string hardware;
};

// [optim]: the AdamW hyperparameters (beta1, beta2, eps, weight_decay, decay_norms_and_biases,
// decay_embeddings, as the optimizer takes them) plus the schedule (lr, min_lr, warmup_steps,
// schedule: optim/lr_schedule.h) and clipping.
struct OptimConfig : AdamWConfig, LrScheduleConfig {
  float grad_clip = 1.0f;  // max global grad norm; 0 = off
};

// [ps]: the parameter server (parallel.mode = "ps"): the last `servers` ranks hold the parameters
// and the optimizer, sharded; the others are workers (parallel.dp of them). See parallel/param_server.h.
struct PsConfig {
  int servers = 1;
  PsConsistency consistency = PsConsistency::sync;  // sync | async | ssp
  int staleness = 2;                 // ssp: steps a worker may run ahead of the slowest
  // Async modes: standby workers (the last ranks, after the servers). Each takes the place of a
  // lost worker at the next step where the workers meet; the servers keep running.
  int spare_workers = 0;
  // Ranks that are not the parallel.dp x tp x pp workers: the servers and the spares.
  int other_ranks() const { return servers + spare_workers; }
};

// parallel.mode: how the dp replicas combine their gradients.
enum class ParallelMode { allreduce, ps };
std::string_view parallel_mode_name(ParallelMode m);  // "allreduce", "ps"
Result<ParallelMode> parse_parallel_mode(std::string_view s);

struct ParallelConfig;
// Ranks reading different data: parallel.dp x parallel.ep (the global batch's divisor).
int64_t data_replicas(const ParallelConfig& p);

struct ParallelConfig {
  int dp = 0;  // 0 (default) = as many as the world allows (world / (tp pp); world - ps.servers in ps mode),
              // resolved by load_run_config_for_world
  int pp = 1;
  int tp = 1;
  // Context parallelism: cp ranks split each sequence (model/context_parallel_hooks.h). cp_mode:
  // "ulysses" (all-to-all to a head split around attention) or "ring" (ring attention).
  int cp = 1;
  std::string cp_mode = "ulysses";
  // Expert parallelism: ep ranks read different data (like dp) and each computes 1/ep of every MoE
  // layer's experts over the tokens all of them routed there (model/expert_parallel_hooks.h).
  int ep = 1;
  double bucket_mb = 4.0;  // gradient all-reduce bucket size
  int zero = 0;            // ZeRO stage over the dp group (0 = plain data parallelism)
  ParallelMode mode = ParallelMode::allreduce;  // allreduce | ps (parameter server, [ps])
  // Pipeline parallelism (plan/parallel_layout.h checks these against the world size and the model).
  PipelineScheduleKind schedule = PipelineScheduleKind::one_f_one_b;  // gpipe | 1f1b | interleaved
  int virtual_stages = 1;             // model chunks per pipeline rank (interleaved: >= 2)
  std::vector<int64_t> stage_layers;  // layers per virtual stage, pp * virtual_stages entries; empty = balance
  bool sequence_parallel = false;     // shard the norm/dropout activations over tp along the sequence
  // "manual": the keys above; "auto": the layout `tessera plan --search` ranks fastest on this many
  // ranks (train.hardware), keeping train.batch_tokens (train/auto_layout.h).
  std::string layout = "manual";
};

// [comm]: compression of the data-parallel gradient exchange (parallel/compression.h).
struct CommConfig {
  CompressionKind compression = CompressionKind::none;  // none | bf16 | topk | powersgd | onebit
  double topk_ratio = 0.01;          // topk: fraction of each bucket's elements sent
  int powersgd_rank = 4;             // powersgd: rank of the P, Q factors
};

// [outer]: the outer optimizer of local SGD (train.local_steps >= 1): SGD on the replicas' averaged
// parameter delta. lr 1, momentum 0 = plain model averaging; DiLoCo uses lr 0.7, momentum 0.9, Nesterov.
struct OuterConfig {
  float lr = 1.0f;
  float momentum = 0.0f;
  bool nesterov = false;
};

struct RunConfig {
  std::string model_preset = "tiny";  // [model] preset; explicit [model] keys override its values
  ModelConfig model;                  // resolved and validated
  std::string init_weights;           // [model] init_weights: optional HF safetensors file ("" = random init)
  DataConfig data;
  TrainConfig train;
  OptimConfig optim;
  PsConfig ps;
  ParallelConfig parallel;
  OuterConfig outer;
  CommConfig comm;

  // Fully resolved config as TOML (every key explicit); parsing it gives back an equal RunConfig.
  std::string to_toml() const;
  bool operator==(const RunConfig&) const;
};

// Every key of every section (plus the derived train.grad_accum, model.name, model.num_parameters).
nlohmann::json to_json(const RunConfig& cfg);

// Keys whose value differs between a saved run config (to_json form, e.g. from a checkpoint) and `now`
// and whose change alters the training trajectory, formatted as
// "section.key <old json> -> <new json>, ..." ("" when none). Driven by the schema's flag.
std::string describe_resume_changes(const nlohmann::json& saved, const nlohmann::json& now);

// Reads and resolves a config file. overrides: "section.key=value" (e.g. "train.steps=20"), applied
// in order after the file; the value is parsed by the key's type.
Result<RunConfig> load_run_config(const std::string& path, const std::vector<std::string>& overrides = {});
// Same from TOML text; source_name prefixes error messages.
Result<RunConfig> parse_run_config(std::string_view toml_text, const std::vector<std::string>& overrides = {},
                                   std::string_view source_name = "<config>");

// As load_run_config, then resolves parallel.dp = 0 ("fill the job") to world_size / (tp x pp x cp x ep),
// re-deriving train.grad_accum from train.batch_tokens: how an elastic restart on fewer ranks keeps
// the global batch.
Result<RunConfig> load_run_config_for_world(const std::string& path, const std::vector<std::string>& overrides,
                                            int world_size);

}  // namespace tessera
