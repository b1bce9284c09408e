// The run config's schema rows: every key of [model] [data] [train] [optim] [parallel] once, with its
// RunConfig member, checks and resume flag. A new key is one row here plus its struct field (and default).
#include "config/run_config_schema.h"

#include <cmath>

#include "parallel/pipeline_schedule.h"
#include <sstream>
#include <type_traits>
#include <utility>

namespace tessera {

const char* key_type_name(KeyType t) {
  switch (t) {
    case KeyType::integer: return "integer";
    case KeyType::floating: return "float";
    case KeyType::boolean: return "boolean";
    case KeyType::string: return "string";
    case KeyType::integer_list: return "array of integers";
  }
  return "?";
}

std::string KeySpec::assign(RunConfig& cfg, const KeyValue& raw) const {
  const KeyValue v = value.normalize(raw);
  for (const KeyCheck& check : checks)
    if (std::string e = check(v); !e.empty()) return e;
  return value.store(cfg, v);
}

namespace {

// ---- bindings: how a member of type T is read, stored and written ----

template <typename T>
constexpr KeyType key_type_of() {
  if constexpr (std::is_same_v<T, bool>) return KeyType::boolean;
  else if constexpr (std::is_integral_v<T>) return KeyType::integer;
  else if constexpr (std::is_floating_point_v<T>) return KeyType::floating;
  else if constexpr (std::is_same_v<T, std::vector<int64_t>>) return KeyType::integer_list;
  else return KeyType::string;
}

// ref(cfg) gives the member (const or not, as cfg is).
template <typename T, typename Ref>
KeyBinding bind(Ref ref) {
  KeyBinding b;
  b.type = key_type_of<T>();
  b.normalize = [](const KeyValue& v) -> KeyValue {
    if constexpr (std::is_same_v<T, float>) return static_cast<double>(static_cast<float>(std::get<double>(v)));
    else return v;
  };
  b.store = [ref](RunConfig& c, const KeyValue& v) -> std::string {
    T& dst = ref(c);
    if constexpr (std::is_same_v<T, bool>) {
      dst = std::get<bool>(v);
    } else if constexpr (std::is_integral_v<T>) {
      const int64_t x = std::get<int64_t>(v);
      if (!std::in_range<T>(x)) return " is out of range (got " + std::to_string(x) + ")";
      dst = static_cast<T>(x);
    } else if constexpr (std::is_floating_point_v<T>) {
      dst = static_cast<T>(std::get<double>(v));
    } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
      dst = std::get<std::vector<int64_t>>(v);
    } else {
      dst = std::get<std::string>(v);
    }
    return "";
  };
  b.toml = [ref](const RunConfig& c) { return toml_literal(ref(c)); };
  b.json = [ref](const RunConfig& c) { return nlohmann::json(ref(c)); };
  return b;
}

// A member of a section struct (cfg.*section).*member; C may be a base of S (OptimConfig's AdamWConfig).
template <typename S, typename C, typename T>
KeyBinding field(S RunConfig::*section, T C::*member) {
  return bind<T>([section, member](auto& cfg) -> auto& { return (cfg.*section).*member; });
}
// A member of RunConfig itself.
template <typename T>
KeyBinding field(T RunConfig::*member) {
  return bind<T>([member](auto& cfg) -> auto& { return cfg.*member; });
}

// An enum written by name: TOML type string, parse errors reported as ": <message>".
template <typename S, typename C, typename E>
KeyBinding enum_field(S RunConfig::*section, E C::*member, std::string_view (*name)(E),
                      Result<E> (*parse)(std::string_view)) {
  auto ref = [section, member](auto& cfg) -> auto& { return (cfg.*section).*member; };
  KeyBinding b;
  b.type = KeyType::string;
  b.normalize = [](const KeyValue& v) { return v; };
  b.store = [ref, parse](RunConfig& c, const KeyValue& v) -> std::string {
    Result<E> e = parse(std::get<std::string>(v));
    if (!e.ok()) return ": " + e.status().message();
    ref(c) = e.value();
    return "";
  };
  b.toml = [ref, name](const RunConfig& c) { return toml_literal(std::string(name(ref(c)))); };
  b.json = [ref, name](const RunConfig& c) { return nlohmann::json(std::string(name(ref(c)))); };
  return b;
}

// A value that resolution code sets from other keys: in the JSON form (so it is compared and hashed), not in TOML.
template <typename S, typename C, typename T>
KeyBinding derived(S RunConfig::*section, T C::*member) {
  KeyBinding b = field(section, member);
  b.in_toml = false;
  b.normalize = nullptr;
  b.store = nullptr;
  b.toml = nullptr;
  return b;
}
KeyBinding computed(KeyType type, nlohmann::json (*json)(const RunConfig&)) {
  KeyBinding b;
  b.type = type;
  b.in_toml = false;
  b.json = json;
  return b;
}

// ---- checks ----

double as_number(const KeyValue& v) {
  return std::holds_alternative<int64_t>(v) ? static_cast<double>(std::get<int64_t>(v)) : std::get<double>(v);
}
std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}
KeyCheck at_least(double lo) {
  return [lo](const KeyValue& v) -> std::string {
    const double x = as_number(v);
    return x < lo ? " must be >= " + number_text(lo) + " (got " + number_text(x) + ")" : "";
  };
}
// ok(x) must hold, else `rule` (with " (got x)" when show_value).
KeyCheck holds(bool (*ok)(double), std::string rule, bool show_value = false) {
  return [ok, rule = std::move(rule), show_value](const KeyValue& v) -> std::string {
    const double x = as_number(v);
    if (ok(x)) return "";
    return show_value ? rule + " (got " + number_text(x) + ")" : rule;
  };
}
KeyCheck not_empty() {
  return [](const KeyValue& v) -> std::string { return std::get<std::string>(v).empty() ? " must not be empty" : ""; };
}
// Layers per virtual stage: each >= 1 but the last, which may be 0 (the final norm and head alone).
KeyCheck stage_layer_counts() {
  return [](const KeyValue& v) -> std::string {
    const auto& list = std::get<std::vector<int64_t>>(v);
    for (size_t i = 0; i < list.size(); ++i) {
      const bool last = i + 1 == list.size();
      if (list[i] < (last ? 0 : 1))
        return "[" + std::to_string(i) + "] must be >= " + (last ? "0" : "1") + " (got " + std::to_string(list[i]) + ")" +
               (last ? "" : ": only the last virtual stage may hold no layers (the final norm and head alone)");
    }
    return "";
  };
}
// A string that must name a pipeline schedule (the message of parse_pipeline_schedule, which then stores it).
KeyCheck pipeline_schedule_name_check() {
  return [](const KeyValue& v) -> std::string {
    const std::string& name = std::get<std::string>(v);
    Result<PipelineScheduleKind> kind = parse_pipeline_schedule(name);
    if (kind.ok()) return "";
    return ": " + kind.status().message() + did_you_mean(name, {"gpipe", "1f1b", "interleaved", "zb-h1"});
  };
}
// A string that must be one of `names` (with a suggestion for a near miss).
KeyCheck one_of(std::vector<std::string> names) {
  return [names](const KeyValue& v) -> std::string {
    const std::string& name = std::get<std::string>(v);
    for (const auto& n : names)
      if (n == name) return "";
    std::string list;
    for (size_t i = 0; i < names.size(); ++i) list += (i ? (i + 1 == names.size() ? " or \"" : ", \"") : "\"") + names[i] + "\"";
    return " must be " + list + " (got \"" + name + "\")" +
           did_you_mean(name, std::vector<std::string_view>(names.begin(), names.end()));
  };
}
std::vector<KeyCheck> count_of_ranks() {
  return {at_least(1), holds([](double x) { return x <= 65536; }, " is too large (max 65536)")};
}

constexpr OnResume kWarn = OnResume::warn;  // the run no longer follows the uninterrupted one
constexpr OnResume kOk = OnResume::ok;

using RC = RunConfig;
using MC = ModelConfig;
using TC = TrainConfig;
using OC = OptimConfig;
using PC = ParallelConfig;
using OU = OuterConfig;

std::vector<SectionSpec> make_schema() {
  return {
      {"model",
       {
           // preset is expanded (and checked) by resolution code before the other [model] keys apply.
           {"preset", field(&RC::model_preset), kOk, {}, "named model; the keys below override its values"},
           {"arch", enum_field(&RC::model, &MC::arch, arch_name, parse_arch), kOk, {}, "gpt2 or llama"},
           {"vocab_size", field(&RC::model, &MC::vocab_size), kOk, {}, "V"},
           {"max_seq_len", field(&RC::model, &MC::max_seq_len), kOk, {}, "maximum T"},
           {"n_layer", field(&RC::model, &MC::n_layer), kOk, {}, "L"},
           {"n_head", field(&RC::model, &MC::n_head), kOk, {}, "NH"},
           {"n_kv_head", field(&RC::model, &MC::n_kv_head), kOk, {}, "grouped-query heads (gpt2: n_head)"},
           {"d_model", field(&RC::model, &MC::d_model), kOk, {}, "C"},
           {"d_ff", field(&RC::model, &MC::d_ff), kOk, {}, "MLP width (gpt2: 4 d_model)"},
           {"norm_eps", field(&RC::model, &MC::norm_eps), kOk, {}, "epsilon of LayerNorm / RMSNorm"},
           {"rope_theta", field(&RC::model, &MC::rope_theta), kOk, {}, "llama only"},
           {"tied_embeddings", field(&RC::model, &MC::tied_embeddings), kOk, {}, "lm_head shares wte"},
           {"moe_experts", field(&RC::model, &MC::moe_experts), kOk, {},
            "mixture of experts: SwiGLU experts per MoE layer (llama only); 0 = dense (docs/moe.md)"},
           {"moe_top_k", field(&RC::model, &MC::moe_top_k), kOk, {}, "experts per token (1..moe_experts)"},
           {"moe_capacity_factor", field(&RC::model, &MC::moe_capacity_factor), kOk, {},
            "0 = dropless; else each expert keeps ceil(factor * tokens * top_k / experts) per micro-batch"},
           {"moe_aux_loss", field(&RC::model, &MC::moe_aux_loss), kOk, {},
            "load-balancing loss coefficient (Switch / Mixtral), per MoE layer"},
           {"moe_z_loss", field(&RC::model, &MC::moe_z_loss), kOk, {}, "router z-loss coefficient (ST-MoE)"},
           {"moe_shared_expert", field(&RC::model, &MC::moe_shared_expert), kOk, {},
            "MoE layers also run a dense SwiGLU of width d_ff on every token"},
           {"moe_every", field(&RC::model, &MC::moe_every), kOk, {}, "layer l is MoE when l % moe_every == 0"},
           {"init_weights", field(&RC::init_weights), kOk, {}, "HF safetensors file or model directory (export --hf) to start from; \"\" = random"},
           {"name", derived(&RC::model, &MC::name), kOk, {}, "the preset's model name"},
           {"num_parameters",
            computed(KeyType::integer, [](const RC& c) { return nlohmann::json(c.model.num_parameters()); }), kOk, {},
            "tied head counted once"},
       }},
      {"data",
       {
           {"dir", field(&RC::data, &DataConfig::dir), kWarn, {}, "prepared dataset directory; required"},
           {"seq_len", field(&RC::data, &DataConfig::seq_len), kWarn, {at_least(1)}, "T; default model.max_seq_len"},
       }},
      {"train",
       {
           {"steps", field(&RC::train, &TC::steps), kOk, {at_least(1)}, "optimizer steps in all"},
           {"local_steps", field(&RC::train, &TC::local_steps), kWarn, {at_least(0)},
            "local SGD / DiLoCo: inner steps per replica between parameter-delta averages ([outer]); 0 = off"},
           {"batch_tokens", field(&RC::train, &TC::batch_tokens), kWarn, {}, "global batch; default one micro-step"},
           {"micro_batch", field(&RC::train, &TC::micro_batch), kOk, {at_least(1)}, "B per rank"},
           {"grad_accum", derived(&RC::train, &TC::grad_accum), kOk, {}, "batch_tokens / (B T dp)"},
           {"seed", field(&RC::train, &TC::seed), kWarn, {at_least(0)}, "initialisation and data order"},
           {"threads", field(&RC::train, &TC::threads), kOk,
            {holds([](double x) { return x >= 0 && x <= 4096; }, " must be in [0, 4096] (0 = all cores)")},
            "OpenMP threads per rank"},
           {"device", enum_field(&RC::train, &TC::device, device_name, parse_device), kOk, {},
            "where every op runs: cpu, or cuda (needs a build with the CUDA backend)"},
           // The levels' own kernels give the same bits; oneDNN's matmuls differ in summation order.
           {"cpu_isa", enum_field(&RC::train, &TC::cpu_isa, cpu_isa_request_name, parse_cpu_isa_request), kOk, {one_of({"auto", "avx2", "avx512", "avx512_bf16"})},
            "CPU kernel level: auto (the best this CPU has) or a lower one forced: avx2, avx512, avx512_bf16"},
           {"eval_interval", field(&RC::train, &TC::eval_interval), kOk, {at_least(0)}, "0 = never"},
           {"eval_batches", field(&RC::train, &TC::eval_batches), kOk, {at_least(1)},
            "validation batches per dp rank at each evaluation"},
           {"log_interval", field(&RC::train, &TC::log_interval), kOk, {at_least(1)},
            "progress line and metrics every N steps"},
           {"moe_warn_share", field(&RC::train, &TC::moe_warn_share), kOk, {at_least(0)},
            "MoE: warn when one expert is routed more than this share of a layer's tokens (K/E when even); 0 = off"},
           {"checkpoint_interval", field(&RC::train, &TC::checkpoint_interval), kOk, {at_least(0)},
            "0 = only at the end"},
           {"keep_checkpoints", field(&RC::train, &TC::keep_checkpoints), kOk, {at_least(1)},
            "complete checkpoints kept (the oldest are deleted)"},
           {"out_dir", field(&RC::train, &TC::out_dir), kOk, {not_empty()}, "run directory"},
           {"timeout_s", field(&RC::train, &TC::timeout_s), kOk,
            {holds([](double x) { return x > 0; }, " must be > 0 seconds")}, "collective timeout"},
           // Recomputation gives bitwise-identical gradients: a change on --resume keeps the trajectory.
           {"recompute", enum_field(&RC::train, &TC::recompute, recompute_name, parse_recompute), kOk, {one_of({"none", "selective", "full"})},
            "activation recomputation: none, selective (attention internals) or full (each layer's input only)"},
           // Reduced precision changes the numerics: a change on --resume leaves the trajectory.
           {"precision", enum_field(&RC::train, &TC::precision, precision_name, parse_precision), kWarn, {one_of({"fp32", "bf16", "fp16"})},
            "matmul arithmetic: fp32, bf16 or fp16 operands with f32 accumulation (fp16: loss scaling)"},
           {"memory_budget_mb", field(&RC::train, &TC::memory_budget_mb), kOk,
            {holds([](double x) { return x >= 0; }, " must be >= 0 (0 = no limit)")},
            "per-rank memory budget checked before launch; 0 = no limit"},
           {"async_checkpoint", field(&RC::train, &TC::async_checkpoint), kOk, {},
            "snapshot the state at the step boundary and write checkpoints in the background"},
           {"sample_ledger", field(&RC::train, &TC::sample_ledger), kOk, {},
            "record which step and data-parallel rank consumed each sample (<out_dir>/ledger; check with "
            "`tessera data ledger`)"},
           // How a run reacts changes its trajectory only once an anomaly happens.
           {"on_anomaly", field(&RC::train, &TC::on_anomaly), kOk, {one_of({"stop", "skip_step", "rollback", "off"})},
            "on a non-finite loss or gradient (or a spike): trace it to its first rank, layer, op and micro-batch, "
            "then stop, skip_step (no update) or rollback (to the last checkpoint, skipping the batch); off: no check"},
           {"spike_loss_factor", field(&RC::train, &TC::spike_loss_factor), kOk,
            {holds([](double x) { return x == 0 || x > 1; }, " must be 0 (off) or > 1")},
            "a step whose loss exceeds this times the mean of the last 20 steps is an anomaly (e.g. 1.5); 0 = off"},
           {"spike_grad_factor", field(&RC::train, &TC::spike_grad_factor), kOk,
            {holds([](double x) { return x == 0 || x > 1; }, " must be 0 (off) or > 1")},
            "a step whose gradient norm exceeds this times the mean of the last 20 steps is an anomaly (e.g. 5); "
            "0 = off"},
           {"hardware", field(&RC::train, &TC::hardware), kOk, {},
            "hardware TOML (configs/hardware/) for the predicted step time and parallel.layout = \"auto\"; "
            "\"\" = the file the environment variable TESSERA_HARDWARE names, else measure this machine briefly at "
            "start"},
       }},
      {"optim",
       {
           {"lr", field(&RC::optim, &OC::lr), kWarn,
            {holds([](double x) { return x > 0 && std::isfinite(x); }, " must be > 0", true)}, "peak learning rate"},
           {"min_lr", field(&RC::optim, &OC::min_lr), kWarn, {}, "default lr / 10; in [0, lr]"},
           {"warmup_steps", field(&RC::optim, &OC::warmup_steps), kWarn, {at_least(0)}, "linear warmup from 0 to lr"},
           {"schedule", enum_field(&RC::optim, &OC::schedule, lr_schedule_name, parse_lr_schedule), kWarn, {},
            "cosine, linear or constant"},
           {"beta1", field(&RC::optim, &OC::beta1), kWarn,
            {holds([](double x) { return x >= 0 && x < 1; }, " must be in [0, 1)", true)}, "AdamW first-moment decay"},
           {"beta2", field(&RC::optim, &OC::beta2), kWarn,
            {holds([](double x) { return x >= 0 && x < 1; }, " must be in [0, 1)", true)}, "AdamW second-moment decay"},
           {"eps", field(&RC::optim, &OC::eps), kWarn, {holds([](double x) { return x > 0; }, " must be > 0")},
            "AdamW denominator epsilon"},
           {"weight_decay", field(&RC::optim, &OC::weight_decay), kWarn,
            {holds([](double x) { return x >= 0; }, " must be >= 0")}, "decoupled weight decay (matrices only by default)"},
           {"decay_norms_and_biases", field(&RC::optim, &OC::decay_norms_and_biases), kWarn, {},
            "also decay norm weights and biases"},
           {"decay_embeddings", field(&RC::optim, &OC::decay_embeddings), kWarn, {}, "also decay the embeddings"},
           {"grad_clip", field(&RC::optim, &OC::grad_clip), kWarn,
            {holds([](double x) { return x >= 0; }, " must be >= 0 (0 = off)")}, "max global grad norm; 0 = off"},
       }},
      {"parallel",
       {
           // How the global batch (train.batch_tokens) is split over ranks and micro-batches is layout,
           // not math: a change on --resume keeps the trajectory (up to float summation order).
           {"dp", field(&RC::parallel, &PC::dp), kOk,
            {at_least(0), holds([](double x) { return x <= 65536; }, " is too large (max 65536)")},
            "data-parallel ranks; 0 = all the ranks tp x pp leave (world / (tp pp))"},
           {"pp", field(&RC::parallel, &PC::pp), kOk, count_of_ranks(), "pipeline stages"},
           {"tp", field(&RC::parallel, &PC::tp), kOk, count_of_ranks(), "tensor-parallel ranks"},
           {"cp", field(&RC::parallel, &PC::cp), kOk, count_of_ranks(),
            "context-parallel ranks: each holds seq_len / cp positions of every sequence"},
           {"cp_mode", field(&RC::parallel, &PC::cp_mode), kOk, {one_of({"ulysses", "ring"})},
            "context parallelism: ulysses (all-to-all to a head split around attention; cp divides the KV heads) or "
            "ring (keys and values passed round the cp ranks, two balanced pieces per rank; 2 x cp divides seq_len)"},
           {"ep", field(&RC::parallel, &PC::ep), kOk, count_of_ranks(),
            "expert-parallel ranks (mixture-of-experts models): each reads its own data, like dp, and computes "
            "model.moe_experts / ep experts of every MoE layer for the tokens of all ep ranks (and stores only "
            "those)"},
           {"bucket_mb", field(&RC::parallel, &PC::bucket_mb), kOk,
            {holds([](double x) { return x > 0; }, " must be > 0")}, "gradient all-reduce bucket size"},
           // How the work is split, not the math: a change on --resume keeps the trajectory.
           {"schedule", enum_field(&RC::parallel, &PC::schedule, pipeline_schedule_name, parse_pipeline_schedule), kOk, {pipeline_schedule_name_check()},
            "pipeline schedule: gpipe, 1f1b, interleaved or zb-h1 (zero-bubble; ignored at pp = 1)"},
           {"virtual_stages", field(&RC::parallel, &PC::virtual_stages), kOk,
            {at_least(1), holds([](double x) { return x <= 1024; }, " is too large (max 1024)")},
            "model chunks per pipeline rank (interleaved: >= 2)"},
           {"stage_layers", field(&RC::parallel, &PC::stage_layers), kOk, {stage_layer_counts()},
            "layers per virtual stage (pp * virtual_stages entries; the last may be 0: the head alone); [] = balance automatically"},
           {"sequence_parallel", field(&RC::parallel, &PC::sequence_parallel), kOk, {},
            "shard norm activations over tp along the sequence (needs tp >= 2)"},
           {"layout", field(&RC::parallel, &PC::layout), kOk, {one_of({"manual", "auto"})},
            "manual: dp/tp/pp/schedule/zero/micro_batch/recompute as set; auto: the fastest predicted layout "
            "that fits memory (tessera plan --search), train.batch_tokens kept"},
           {"zero", field(&RC::parallel, &PC::zero), kOk,
            {at_least(0), holds([](double x) { return x <= 3; }, " must be 0, 1, 2 or 3")},
            "ZeRO stage over the dp group: 1 shards optimizer state, 2 also gradients, 3 also parameters"},
           // sync ps is all-reduce: the trajectory changes with ps.consistency, flagged there.
           {"mode", enum_field(&RC::parallel, &PC::mode, parallel_mode_name, parse_parallel_mode), kOk, {one_of({"allreduce", "ps"})},
            "gradient exchange: allreduce (data parallelism) or ps (parameter server, [ps]; dp = the workers' tp x pp replicas)"},
       }},
      {"ps",
       {
           {"servers", field(&RC::ps, &PsConfig::servers), kOk, count_of_ranks(),
            "parameter-server ranks (the last ones); each holds a contiguous shard of every model chunk's parameters"},
           {"consistency", enum_field(&RC::ps, &PsConfig::consistency, ps_consistency_name, parse_ps_consistency), kWarn, {one_of({"sync", "async", "ssp"})},
            "sync (= all-reduce), async (each push applied on arrival) or ssp (bounded staleness)"},
           {"staleness", field(&RC::ps, &PsConfig::staleness), kWarn, {at_least(0)},
            "ssp: steps a worker may complete ahead of the slowest worker"},
           {"spare_workers", field(&RC::ps, &PsConfig::spare_workers), kOk, {at_least(0)},
            "async / ssp: standby worker ranks (the last ones, after the servers); each replaces a lost worker "
            "where the workers next meet, without restarting the servers"},
       }},
      // Compression changes the averaged gradient (and its error-feedback state is not checkpointed):
      // a change on --resume leaves the trajectory.
      {"comm",
       {
           {"compression", enum_field(&RC::comm, &CommConfig::compression, compression_name, parse_compression), kWarn,
            {one_of({"none", "bf16", "topk", "powersgd", "onebit"})},
            "data-parallel gradient compression: none, bf16, topk, powersgd or onebit (parallel/compression.h)"},
           {"topk_ratio", field(&RC::comm, &CommConfig::topk_ratio), kWarn,
            {holds([](double x) { return x > 0 && x <= 1; }, " must be in (0, 1]", true)},
            "topk: fraction of each gradient bucket's elements sent"},
           {"powersgd_rank", field(&RC::comm, &CommConfig::powersgd_rank), kWarn,
            {at_least(1), holds([](double x) { return x <= 256; }, " is too large (max 256)")},
            "powersgd: rank r of the P and Q factors of each matrix"},
       }},
      {"outer",
       {
           {"lr", field(&RC::outer, &OU::lr), kWarn,
            {holds([](double x) { return x > 0 && std::isfinite(x); }, " must be > 0", true)},
            "outer learning rate on the averaged parameter delta (1 = plain averaging)"},
           {"momentum", field(&RC::outer, &OU::momentum), kWarn,
            {holds([](double x) { return x >= 0 && x < 1; }, " must be in [0, 1)", true)}, "outer SGD momentum"},
           {"nesterov", field(&RC::outer, &OU::nesterov), kWarn, {}, "Nesterov outer momentum (DiLoCo)"},
       }},
  };
}

}  // namespace

const std::vector<SectionSpec>& run_config_schema() {
  static const std::vector<SectionSpec> schema = make_schema();
  return schema;
}

const SectionSpec* find_section(std::string_view name) {
  for (const SectionSpec& s : run_config_schema())
    if (s.name == name) return &s;
  return nullptr;
}

const KeySpec* find_key(const SectionSpec& sec, std::string_view name) {
  for (const KeySpec& k : sec.keys)
    if (k.name == name && k.value.in_toml) return &k;
  return nullptr;
}

std::vector<std::string_view> section_names() {
  std::vector<std::string_view> v;
  for (const SectionSpec& s : run_config_schema()) v.push_back(s.name);
  return v;
}

std::vector<std::string_view> key_names(const SectionSpec& sec) {
  std::vector<std::string_view> v;
  for (const KeySpec& k : sec.keys)
    if (k.value.in_toml) v.push_back(k.name);
  return v;
}

}  // namespace tessera
