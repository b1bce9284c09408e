// The refused combinations (refusals.h). Each row's condition is a captureless lambda over the
// config; its keys name the values the error quotes, in the order the sentence reads.
#include "plan/refusals.h"

#include "config/run_config_schema.h"
#include "core/log.h"

namespace tessera {

namespace {

bool compresses(const RunConfig& c) { return c.comm.compression != CompressionKind::none; }
bool compresses_other_than_bf16(const RunConfig& c) {
  return compresses(c) && c.comm.compression != CompressionKind::bf16;
}
bool parameter_server(const RunConfig& c) { return c.parallel.mode == ParallelMode::ps; }
bool fp16(const RunConfig& c) { return c.train.precision == Precision::fp16; }
bool spares(const RunConfig& c) { return c.ps.spare_workers > 0; }

bool context_parallel(const RunConfig& c) { return c.parallel.cp > 1; }
bool expert_parallel(const RunConfig& c) { return c.parallel.ep > 1; }
// At pp = 1 the layout runs 1F1B whatever the schedule says.
bool zero_bubble(const RunConfig& c) { return c.parallel.schedule == PipelineScheduleKind::zb_h1 && c.parallel.pp > 1; }

const std::vector<Refusal>& table() {
  static const std::vector<Refusal> rows = {
      {"train.precision = \"fp16\" with parallel.zero >= 2",
       {"train.precision", "parallel.zero"},
       [](const RunConfig& c) { return fp16(c) && c.parallel.zero >= 2; },
       "the loss scaler checks the flat gradients, which ZeRO 2/3 shard",
       "use parallel.zero = 1, or train.precision = \"bf16\" (no loss scaling needed)"},
      {"parallel.zero >= 2 with parallel.sequence_parallel = true",
       {"parallel.zero", "parallel.sequence_parallel"},
       [](const RunConfig& c) { return c.parallel.zero >= 2 && c.parallel.sequence_parallel; },
       "sequence-parallel gradients are summed over tp after the ZeRO reduction, which 2/3 leave sharded",
       "use parallel.zero = 1, or parallel.sequence_parallel = false"},
      {"parallel.mode = \"ps\" with parallel.zero >= 1",
       {"parallel.mode", "parallel.zero"},
       [](const RunConfig& c) { return parameter_server(c) && c.parallel.zero > 0; },
       "the servers already shard the parameters and the optimizer state",
       "set parallel.zero = 0, or parallel.mode = \"allreduce\""},
      {"parallel.mode = \"ps\" with comm.compression = \"powersgd\"",
       {"parallel.mode", "comm.compression"},
       [](const RunConfig& c) { return parameter_server(c) && c.comm.compression == CompressionKind::powersgd; },
       "a push is a flat range of the parameter buffer, not the matrices PowerSGD factors",
       "use comm.compression = \"bf16\", \"topk\" or \"onebit\""},
      {"parallel.mode = \"ps\" with train.precision = \"fp16\"",
       {"parallel.mode", "train.precision"},
       [](const RunConfig& c) { return parameter_server(c) && fp16(c); },
       "the loss scaler would need every worker's overflow verdict each step",
       "use train.precision = \"bf16\""},
      {"train.local_steps >= 1 with parallel.mode = \"ps\"",
       {"train.local_steps", "parallel.mode"},
       [](const RunConfig& c) { return c.train.local_steps > 0 && parameter_server(c); },
       "local SGD averages the replicas with all-reduce",
       "set parallel.mode = \"allreduce\", or train.local_steps = 0"},
      {"train.local_steps >= 1 with parallel.zero >= 1",
       {"train.local_steps", "parallel.zero"},
       [](const RunConfig& c) { return c.train.local_steps > 0 && c.parallel.zero > 0; },
       "local SGD runs an optimizer per replica, which ZeRO would shard over the replicas",
       "set parallel.zero = 0, or train.local_steps = 0 (synchronous training)"},
      {"comm.compression other than \"none\" or \"bf16\" with parallel.zero >= 1",
       {"comm.compression", "parallel.zero"},
       [](const RunConfig& c) { return compresses_other_than_bf16(c) && c.parallel.zero > 0; },
       "ZeRO reduce-scatters gradient shards, which only bf16 can sum on the way",
       "use comm.compression = \"bf16\", or parallel.zero = 0"},
      {"comm.compression other than \"none\" with parallel.zero >= 1 and train.precision = \"fp16\"",
       {"comm.compression", "parallel.zero", "train.precision"},
       [](const RunConfig& c) { return compresses(c) && c.parallel.zero > 0 && fp16(c); },
       "the loss scaler's overflow check reads the flat gradient, which the bf16 reduction overwrites",
       "use train.precision = \"bf16\", or comm.compression = \"none\""},
      {"comm.compression other than \"none\" or \"bf16\" with train.precision = \"fp16\"",
       {"comm.compression", "train.precision"},
       [](const RunConfig& c) { return compresses_other_than_bf16(c) && fp16(c); },
       "the error-feedback residual would carry loss-scaled (and overflowed) gradients across steps",
       "use train.precision = \"bf16\", or comm.compression = \"bf16\""},
      {"ps.spare_workers >= 1 without parallel.mode = \"ps\"",
       {"ps.spare_workers", "parallel.mode"},
       [](const RunConfig& c) { return spares(c) && !parameter_server(c); },
       "spare workers stand by for the workers of a parameter server",
       "set ps.spare_workers = 0, or parallel.mode = \"ps\" with ps.consistency = \"async\" or \"ssp\""},
      {"ps.spare_workers >= 1 with ps.consistency = \"sync\"",
       {"ps.spare_workers", "ps.consistency"},
       [](const RunConfig& c) { return spares(c) && parameter_server(c) && c.ps.consistency == PsConsistency::sync; },
       "sync mode ends the run when a worker is missing; only the async modes go on without one and can take a spare",
       "use ps.consistency = \"async\" or \"ssp\", or ps.spare_workers = 0"},
      {"ps.spare_workers >= 1 with parallel.tp or parallel.pp >= 2",
       {"ps.spare_workers", "parallel.tp", "parallel.pp"},
       [](const RunConfig& c) { return spares(c) && c.parallel.tp * c.parallel.pp > 1; },
       "a spare takes the place of a whole replica's only rank; a tp x pp replica cannot go on without its lost rank",
       "use parallel.tp = parallel.pp = 1, or ps.spare_workers = 0"},
      {"ps.spare_workers >= 1 with comm.compression other than \"none\"",
       {"ps.spare_workers", "comm.compression"},
       [](const RunConfig& c) { return spares(c) && compresses(c); },
       "the lost worker's error-feedback residuals die with it, and a checkpoint has no place for a spare's",
       "set comm.compression = \"none\", or ps.spare_workers = 0"},
      {"ps.spare_workers >= 1 with train.sample_ledger = true",
       {"ps.spare_workers", "train.sample_ledger"},
       [](const RunConfig& c) { return spares(c) && c.train.sample_ledger; },
       "the async modes skip a lost worker's batches until its spare starts, so no epoch is seen exactly once",
       "set train.sample_ledger = false, or ps.spare_workers = 0"},
      {"train.on_anomaly = \"skip_step\" or \"rollback\" with parallel.mode = \"ps\"",
       {"train.on_anomaly", "parallel.mode"},
       [](const RunConfig& c) {
         return parameter_server(c) && (c.train.on_anomaly == "skip_step" || c.train.on_anomaly == "rollback");
       },
       "a worker's gradients reach the servers in its update, with no step all ranks take together to check them",
       "use train.on_anomaly = \"stop\" (a non-finite loss stops a parameter-server run)"},
      {"train.on_anomaly = \"skip_step\" with comm.compression other than \"none\"",
       {"train.on_anomaly", "comm.compression"},
       [](const RunConfig& c) { return c.train.on_anomaly == "skip_step" && compresses(c); },
       "the skipped step's gradients already went into the compression's error-feedback state",
       "use train.on_anomaly = \"rollback\" (it restores that state from the checkpoint)"},
      {"train.on_anomaly = \"rollback\" with train.checkpoint_interval = 0",
       {"train.on_anomaly", "train.checkpoint_interval"},
       [](const RunConfig& c) { return c.train.on_anomaly == "rollback" && c.train.checkpoint_interval == 0; },
       "a rollback returns to the last checkpoint, and the run saves none before its end",
       "set train.checkpoint_interval (e.g. 50), or train.on_anomaly = \"skip_step\""},
      {"model.moe_experts >= 1 with parallel.sequence_parallel = true",
       {"model.moe_experts", "parallel.sequence_parallel"},
       [](const RunConfig& c) { return c.model.moe_experts > 0 && c.parallel.sequence_parallel; },
       "mixture-of-experts layers run whole on every tp rank (each routes all of the micro-batch's tokens), so "
       "they cannot take sequence parallelism's row shards",
       "set parallel.sequence_parallel = false (tp still splits attention and any shared expert)"},
      {"comm.compression other than \"none\" with train.local_steps >= 1",
       {"comm.compression", "train.local_steps"},
       [](const RunConfig& c) { return compresses(c) && c.train.local_steps > 0; },
       "local SGD averages parameter deltas, not gradients",
       "set comm.compression = \"none\", or train.local_steps = 0"},
      {"parallel.cp >= 2 with parallel.mode = \"ps\"",
       {"parallel.cp", "parallel.mode"},
       [](const RunConfig& c) { return context_parallel(c) && parameter_server(c); },
       "a worker pushes its own gradients, but a cp group's ranks hold parts of one sequence's gradient",
       "use parallel.mode = \"allreduce\", or parallel.cp = 1"},
      {"parallel.cp >= 2 with train.local_steps >= 1",
       {"parallel.cp", "train.local_steps"},
       [](const RunConfig& c) { return context_parallel(c) && c.train.local_steps > 0; },
       "local SGD steps each replica on its own gradient, but a cp rank's gradient covers only its positions",
       "set train.local_steps = 0, or parallel.cp = 1"},
      {"parallel.cp >= 2 with comm.compression other than \"none\"",
       {"parallel.cp", "comm.compression"},
       [](const RunConfig& c) { return context_parallel(c) && compresses(c); },
       "the compressed exchange and its saved error-feedback state are per data-parallel rank, not per dp x cp rank",
       "set comm.compression = \"none\", or parallel.cp = 1"},
      {"parallel.cp >= 2 with model.moe_capacity_factor > 0",
       {"parallel.cp", "model.moe_capacity_factor"},
       [](const RunConfig& c) { return context_parallel(c) && c.model.is_moe() && c.model.moe_capacity_factor > 0; },
       "a capacity drops an expert's assignments beyond it in the token order of the whole micro-batch, which cp "
       "splits over ranks",
       "use dropless routing (model.moe_capacity_factor = 0) with cp, or parallel.cp = 1"},
      {"parallel.ep >= 2 with parallel.mode = \"ps\"",
       {"parallel.ep", "parallel.mode"},
       [](const RunConfig& c) { return expert_parallel(c) && parameter_server(c); },
       "an ep rank's expert gradients hold the tokens of every ep rank, which the servers would count ep times",
       "use parallel.mode = \"allreduce\", or parallel.ep = 1"},
      {"parallel.ep >= 2 with train.local_steps >= 1",
       {"parallel.ep", "train.local_steps"},
       [](const RunConfig& c) { return expert_parallel(c) && c.train.local_steps > 0; },
       "local SGD steps each replica on its own gradient, but an ep rank computes only its own experts' gradients",
       "set train.local_steps = 0, or parallel.ep = 1"},
      {"parallel.ep >= 2 with comm.compression other than \"none\"",
       {"parallel.ep", "comm.compression"},
       [](const RunConfig& c) { return expert_parallel(c) && compresses(c); },
       "the compressed exchange and its saved error-feedback state are per data-parallel rank, not per dp x ep rank",
       "set comm.compression = \"none\", or parallel.ep = 1"},
      {"parallel.ep >= 2 with parallel.cp >= 2",
       {"parallel.ep", "parallel.cp"},
       [](const RunConfig& c) { return expert_parallel(c) && context_parallel(c); },
       "the two have not been composed yet (the dispatch would run over each cp position's ep group)",
       "use parallel.ep or parallel.cp, not both"},
      {"parallel.schedule = \"zb-h1\" with train.recompute other than \"none\"",
       {"parallel.schedule", "train.recompute"},
       [](const RunConfig& c) { return zero_bubble(c) && c.train.recompute != Recompute::none; },
       "the weight-gradient pass reads each layer's saved linear inputs, which recomputation does not keep",
       "set train.recompute = \"none\", or parallel.schedule = \"1f1b\""},
      {"parallel.schedule = \"zb-h1\" with parallel.sequence_parallel = true",
       {"parallel.schedule", "parallel.sequence_parallel"},
       [](const RunConfig& c) { return zero_bubble(c) && c.parallel.sequence_parallel && c.parallel.tp > 1; },
       "the weight-gradient pass would have to all-gather each column-parallel input again",
       "set parallel.sequence_parallel = false, or parallel.schedule = \"1f1b\""},
      {"parallel.schedule = \"zb-h1\" with parallel.zero >= 2",
       {"parallel.schedule", "parallel.zero"},
       [](const RunConfig& c) { return zero_bubble(c) && c.parallel.zero >= 2; },
       "ZeRO 2 and 3 reduce-scatter each micro-batch's gradients, which the weight passes complete out of order; "
       "not composed yet",
       "use parallel.zero = 1 (or 0), or parallel.schedule = \"1f1b\""},
      {"parallel.schedule = \"zb-h1\" with parallel.mode = \"ps\"",
       {"parallel.schedule", "parallel.mode"},
       [](const RunConfig& c) { return zero_bubble(c) && parameter_server(c); },
       "a parameter-server worker's pushes have not been composed with split backwards yet",
       "use parallel.mode = \"allreduce\", or parallel.schedule = \"1f1b\""},
      {"parallel.schedule = \"zb-h1\" with parallel.cp >= 2",
       {"parallel.schedule", "parallel.cp"},
       [](const RunConfig& c) { return zero_bubble(c) && context_parallel(c); },
       "not composed yet",
       "use parallel.schedule = \"1f1b\" with cp, or parallel.cp = 1"},
      {"parallel.schedule = \"zb-h1\" with parallel.ep >= 2",
       {"parallel.schedule", "parallel.ep"},
       [](const RunConfig& c) { return zero_bubble(c) && expert_parallel(c); },
       "not composed yet",
       "use parallel.schedule = \"1f1b\" with ep, or parallel.ep = 1"},
  };
  return rows;
}

// "parallel.zero = 2": a key and its value as TOML writes it.
std::string key_equals_value(const RunConfig& cfg, std::string_view dotted) {
  const size_t dot = dotted.find('.');
  TS_CHECK(dot != std::string_view::npos) << "refusal key '" << dotted << "' is not section.name";
  const SectionSpec* sec = find_section(dotted.substr(0, dot));
  TS_CHECK(sec != nullptr) << "refusal key '" << dotted << "': no such section";
  const KeySpec* key = find_key(*sec, dotted.substr(dot + 1));
  TS_CHECK(key != nullptr) << "refusal key '" << dotted << "': no such key";
  return std::string(dotted) + " = " + key->value.toml(cfg);
}

}  // namespace

std::span<const Refusal> refusals() { return table(); }

const Refusal* first_refusal(const RunConfig& cfg) {
  for (const Refusal& r : table())
    if (r.applies(cfg)) return &r;
  return nullptr;
}

Status check_refusals(const RunConfig& cfg) {
  if (const Refusal* found = first_refusal(cfg)) {
    const Refusal& r = *found;
    std::string instance;
    for (size_t i = 0; i < r.keys.size(); ++i)
      instance += (i == 0 ? "" : i + 1 == r.keys.size() && i > 1 ? " and " : " with ") + key_equals_value(cfg, r.keys[i]);
    return invalid_argument(instance + " is not supported: " + std::string(r.why) + "; " + std::string(r.fix));
  }
  return Status::ok_status();
}

std::string refusals_markdown() {
  std::string md =
      "## Refused combinations\n\n"
      "Each is refused before a rank starts, with this reason and fix (`src/plan/refusals.cpp`, one row each).\n\n"
      "| refused | why | instead |\n|---|---|---|\n";
  auto cell = [](std::string_view s) {
    std::string out;
    for (char ch : s) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
    return out;
  };
  for (const Refusal& r : table())
    md += "| `" + cell(r.when) + "` | " + cell(r.why) + " | " + cell(r.fix) + " |\n";
  return md;
}

}  // namespace tessera
