// tessera plan --config run.toml [section.key=value ...] [--ranks N] [--hardware FILE]: every rank's
// predicted peak memory by category (plan/memory_plan.h), the largest micro-batch that fits
// train.memory_budget_mb and, over budget, the single config changes that would fit; with --hardware
// the predicted step time too. --search ranks every layout; --calibrate measures this machine
// (cmd_plan_time.cpp). Builds no model and needs no data.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cmd_plan_time.h"
#include "cli/commands.h"
#include "core/memory.h"
#include "plan/memory_plan.h"
#include "plan/step_time_json.h"
#include "config/run_config.h"

namespace tessera::cli {

namespace {
struct PlanArgs {
  std::string config;
  std::vector<std::string> overrides;
  int ranks = 0;
  bool json = false;
  std::string hardware;  // --hardware FILE.toml
  int ranks_per_node = 0;  // --ranks-per-node: 0 = the file's [node] devices
  bool search = false;
  int top = 20;
  bool calibrate = false;
  bool quick = false;                 // --calibrate --quick: the trainer's brief measurement
  std::string out;                   // --calibrate: where to write (default stdout)
  std::string name = "this-machine";  // --calibrate: the file's name field
};

// The plan as one JSON object (bytes), for scripts (bench/plan_vs_measured.sh).
void print_json(const RunConfig& c, const MemoryPlan& p, const nlohmann::json& step_time) {
  auto cats = [](const MemBytes& b) {
    nlohmann::json j = nlohmann::json::object();
    for (int i = 0; i < kNumMemCategories; ++i) j[std::string(mem_category_name(static_cast<MemCategory>(i)))] = b[i];
    return j;
  };
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankMemoryPlan& r : p.ranks) {
    nlohmann::json chunks = nlohmann::json::array();
    for (size_t i = 0; i < r.chunk_layers.size(); ++i)
      chunks.push_back({{"layers", {r.chunk_layers[i].first, r.chunk_layers[i].second}}, {"slots", r.activation_slots[i]}});
    ranks.push_back({{"rank", r.rank}, {"dp", r.coord.dp}, {"pp", r.coord.pp}, {"tp", r.coord.tp}, {"cp", r.coord.cp}, {"chunks", chunks},
                     {"parameters", r.parameters}, {"peak", r.peak}, {"at_peak", cats(r.at_peak)},
                     {"category_peak", cats(r.category_peak)},
                     {"largest_micro_batch_that_fits", r.largest_micro_batch_that_fits}});
  }
  nlohmann::json out = {{"layout", p.layout.describe()}, {"world_size", p.world_size},
                        {"micro_batch", c.train.micro_batch}, {"grad_accum", c.train.grad_accum},
                        {"zero", c.parallel.zero}, {"recompute", recompute_name(c.train.recompute)},
                        {"budget_bytes", p.budget_bytes}, {"peak", p.peak()}, {"fits", p.fits()},
                        {"largest_micro_batch_that_fits", p.largest_micro_batch_that_fits()}, {"ranks", ranks}};
  if (!step_time.is_null()) out["step_time"] = step_time;
  if (!p.fits()) {
    nlohmann::json opts = nlohmann::json::array();
    for (const MemoryOption& o : memory_options_that_fit(c, p.world_size, p.budget_bytes))
      opts.push_back({{"change", o.change}, {"peak", o.peak}});
    out["options_that_fit"] = opts;
  }
  std::printf("%s\n", out.dump(1).c_str());
}

// "0,2,4" (long lists shortened: "0,2,4,...,30 (16 ranks)").
std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  const size_t n = ranks.size(), shown = n > 8 ? 6 : n;
  for (size_t i = 0; i < shown; ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
  if (shown < n) out += ",...," + std::to_string(ranks.back()) + " (" + std::to_string(n) + " ranks)";
  return out;
}

std::string chunks_of(const RankMemoryPlan& r) {
  std::string out;
  for (size_t c = 0; c < r.chunk_layers.size(); ++c)
    out += (c ? " " : "") + std::string("[") + std::to_string(r.chunk_layers[c].first) + "," +
           std::to_string(r.chunk_layers[c].second) + ")x" + std::to_string(r.activation_slots[c]);
  return out;
}

int print_memory(const RunConfig& c, const MemoryPlan& p, int world);

int run_plan(const PlanArgs& a) {
  if (a.calibrate) {
    if (a.config.empty()) return run_plan_calibrate(a.out, a.name, a.quick, nullptr);
    auto run = load_run_config(a.config, a.overrides);
    if (!run.ok()) return fail(run.status());
    return run_plan_calibrate(a.out, a.name, a.quick, &*run);
  }
  if (a.config.empty())
    return fail("tessera plan needs --config FILE.toml (the run to plan), unless it is --calibrate");
  HardwareSpec hw;
  if (!a.hardware.empty()) {
    auto h = load_hardware(a.hardware);
    if (!h.ok()) return fail(h.status());
    hw = *h;
  }
  if (a.ranks_per_node > 0) {
    if (a.hardware.empty()) return fail("--ranks-per-node places ranks on the nodes of a hardware file: add --hardware FILE.toml");
    if (hw.cores_per_node <= 0 && a.ranks_per_node > hw.devices_per_node)
      return fail("--ranks-per-node " + std::to_string(a.ranks_per_node) + ": a node of " + a.hardware + " holds " +
                  std::to_string(hw.devices_per_node) + " devices, one rank each; pass at most " +
                  std::to_string(hw.devices_per_node));
    hw.devices_per_node = a.ranks_per_node;
  }
  const int planned = a.search ? std::max(1, a.ranks) : a.ranks;
  if (!a.json && a.ranks_per_node == 0 && hw.cores_per_node > 0 && planned > hw.devices_per_node)
    std::printf("%s: %d ranks per node ([node] devices), so %d ranks span %d nodes; for one machine running them all "
                "(sharing its %d cores) pass --ranks-per-node %d\n",
                a.hardware.c_str(), hw.devices_per_node, planned,
                (planned + hw.devices_per_node - 1) / hw.devices_per_node, hw.cores_per_node, planned);
  if (a.search) {
    if (a.hardware.empty())
      return fail("--search ranks layouts by predicted step time and needs --hardware FILE.toml: use one of "
                  "configs/hardware/, or measure this machine with tessera plan --calibrate --out FILE.toml");
    // The layout keys are the search's: load one replica of micro-batch 1 (any global batch that is a
    // multiple of data.seq_len loads); the search keeps train.batch_tokens, or, where the config leaves
    // it to be derived, micro_batch x seq_len x N (one micro-step of the config's micro-batch per rank).
    const int world = a.ranks > 0 ? a.ranks : 1;
    std::vector<std::string> o = a.overrides;
    for (const char* k : {"parallel.tp=1", "parallel.pp=1", "parallel.dp=1", "parallel.virtual_stages=1",
                          "parallel.schedule=1f1b", "parallel.sequence_parallel=false"})
      o.push_back(k);
    auto with = [&](std::vector<std::string> extra) {
      std::vector<std::string> all = o;
      all.insert(all.end(), extra.begin(), extra.end());
      return load_run_config_for_world(a.config, all, 1);
    };
    auto own = with({});  // the config's micro-batch
    auto one = with({"train.micro_batch=1"}), two = with({"train.micro_batch=2"});
    if (!one.ok()) return fail(one.status());
    int64_t batch = one->train.batch_tokens;
    if (two.ok() && two->train.batch_tokens != batch)  // derived from the micro-batch: not set
      batch = (own.ok() ? own->train.micro_batch : 1) * one->data.seq_len * world;
    auto base = with({"train.micro_batch=1", "train.batch_tokens=" + std::to_string(batch)});
    if (!base.ok()) return fail(base.status());
    base->parallel.stage_layers.clear();
    return run_plan_search(*base, world, hw, a.json, a.top);
  }
  auto cfg = load_run_config(a.config, a.overrides);
  if (!cfg.ok()) return fail(cfg.status());
  const int mp = cfg->parallel.tp * cfg->parallel.pp * cfg->parallel.cp * cfg->parallel.ep;  // ranks per dp replica
  int world = cfg->parallel.dp * mp;
  if (world == 0 && a.ranks <= 0) {  // parallel.dp = 0 fills the job: without --ranks, plan one replica
    const bool ps = cfg->parallel.mode == ParallelMode::ps;
    world = (ps ? cfg->ps.other_ranks() : 0) + mp;
    cfg = load_run_config_for_world(a.config, a.overrides, world);
    if (!cfg.ok()) return fail(cfg.status());
    if (!a.json)
      std::printf("parallel.dp = 0 fills the job: planning for %d rank%s (one data-parallel replica); pass --ranks N "
                  "for an N-rank job\n", world, world == 1 ? "" : "s");
  }
  if (a.ranks > 0 && a.ranks != world) {
    const int servers = cfg->parallel.mode == ParallelMode::ps ? cfg->ps.other_ranks() : 0;  // not replicas
    if (a.ranks <= servers || (a.ranks - servers) % mp != 0)
      return fail("--ranks " + std::to_string(a.ranks) + (servers ? " less ps.servers (+ ps.spare_workers) = " + std::to_string(servers) : "") +
                  " is not a multiple of parallel.tp x parallel.pp x parallel.cp x parallel.ep = " + std::to_string(mp) + ": pass --ranks " +
                  (servers ? std::to_string(servers) + " + " : "") + std::to_string(mp) +
                  " x dp, or change parallel.tp/pp/cp/ep");
    // The same as `parallel.dp=N/(tp*pp*cp*ep)` on the command line (train.batch_tokens re-derived if not set).
    std::vector<std::string> o = a.overrides;
    o.push_back("parallel.dp=" + std::to_string((a.ranks - servers) / mp));
    cfg = load_run_config(a.config, o);
    if (!cfg.ok()) return fail(cfg.status());
    world = a.ranks;
    if (!a.json) std::printf("--ranks %d: parallel.dp = %d\n", a.ranks, (a.ranks - servers) / mp);
  }
  const RunConfig& c = *cfg;
  auto plan = plan_memory(c, world);
  if (!plan.ok()) return fail(plan.status());
  const MemoryPlan& p = *plan;
  std::optional<StepTimePrediction> time;
  if (!a.hardware.empty()) {
    auto t = predict_step_time(c, world, hw);
    if (!t.ok()) return fail(t.status());
    time = *t;
  }
  if (a.json) {
    print_json(c, p, time ? step_time_json(*time) : nlohmann::json());
    return 0;
  }
  const int rc = print_memory(c, p, world);
  if (time) print_step_time(*time, hw);
  return rc;
}

int print_memory(const RunConfig& c, const MemoryPlan& p, int world) {

  std::printf("tessera plan: %s (%s, %.2fM parameters) on %d rank(s): %s; micro_batch %lld x seq_len %lld, "
              "grad_accum %lld; zero %d, recompute %s\n",
              c.model.name.c_str(), std::string(arch_name(c.model.arch)).c_str(), c.model.num_parameters() / 1e6, world,
              p.layout.describe().c_str(), (long long)c.train.micro_batch, (long long)c.data.seq_len,
              (long long)c.train.grad_accum, c.parallel.zero, std::string(recompute_name(c.train.recompute)).c_str());
  std::printf("predicted peak memory per rank in MiB, as the allocator counts it (each category at the moment of "
              "the peak; chunks: layers x activation slots; fit mb: the largest train.micro_batch that fits the "
              "budget, train.batch_tokens kept):\n");
  std::printf("%-18s %-6s %-16s %10s %10s %10s %11s %13s %9s %10s %10s %8s\n", "ranks", "stage", "chunks",
              "parameters", "gradients", "optimizer", "activations", "communication", "workspace", "total",
              "params(M)", "fit mb");
  std::vector<bool> done(p.ranks.size(), false);
  for (size_t i = 0; i < p.ranks.size(); ++i) {
    if (done[i]) continue;
    const RankMemoryPlan& r = p.ranks[i];
    std::vector<int> same;
    for (size_t j = i; j < p.ranks.size(); ++j)
      if (!done[j] && p.ranks[j].same_kind(r)) {
        same.push_back(p.ranks[j].rank);
        done[j] = true;
      }
    auto mib = [&](MemCategory cat) { return format_mib(r.at_peak_bytes(cat)); };
    std::string stage = std::to_string(r.coord.pp) + (p.layout.grid.tp > 1 ? "/tp" + std::to_string(r.coord.tp) : "");
    std::printf("%-18s %-6s %-16s %10s %10s %10s %11s %13s %9s %10s %10.2f %8lld\n", rank_list(same).c_str(),
                stage.c_str(), chunks_of(r).c_str(), mib(MemCategory::parameters).c_str(),
                mib(MemCategory::gradients).c_str(), mib(MemCategory::optimizer_state).c_str(),
                mib(MemCategory::activations).c_str(), mib(MemCategory::communication).c_str(),
                mib(MemCategory::other).c_str(), format_mib(r.peak).c_str(), r.parameters / 1e6,
                (long long)r.largest_micro_batch_that_fits);
  }
  const RankMemoryPlan& w = p.worst();
  if (c.parallel.zero >= 2)
    std::printf("ZeRO-%d: gradient%s pages resident at their sampled peak (reductions in flight, %s)\n", c.parallel.zero,
                c.parallel.zero >= 3 ? " and parameter" : "",
                c.parallel.zero >= 3 ? "gathered layers current + prefetch" : "one layer behind");
  if (p.budget_bytes <= 0) {
    std::printf("budget: none (train.memory_budget_mb = 0); peak %s MiB on rank %d; every valid micro_batch up to "
                "%lld fits\n",
                format_mib(w.peak).c_str(), w.rank, (long long)p.largest_micro_batch_that_fits());
    return 0;
  }
  const long long largest = (long long)p.largest_micro_batch_that_fits();
  if (p.fits()) {
    std::printf("budget %s MiB: fits (peak %s MiB on rank %d); largest micro_batch that fits: %lld\n",
                format_mib(p.budget_bytes).c_str(), format_mib(w.peak).c_str(), w.rank, largest);
    return 0;
  }
  std::printf("budget %s MiB: OVER on rank %d (peak %s MiB); largest micro_batch that fits: %s\n",
              format_mib(p.budget_bytes).c_str(), w.rank, format_mib(w.peak).c_str(),
              largest > 0 ? std::to_string(largest).c_str() : "none");
  const std::vector<MemoryOption> options = memory_options_that_fit(c, world, p.budget_bytes);
  if (options.empty()) {
    std::printf("no single change of parallel.zero, train.recompute, parallel.sequence_parallel, parallel.tp/pp or "
                "train.micro_batch fits; use more ranks (--ranks) or raise train.memory_budget_mb\n");
  } else {
    std::printf("single changes that fit:\n");
    for (const MemoryOption& o : options) std::printf("  %-40s peak %s MiB\n", o.change.c_str(), format_mib(o.peak).c_str());
  }
  return 0;
}
}  // namespace

Runner add_plan(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* c = app.add_subcommand(
      "plan", "Predict every rank's peak memory for a run config, without building the model or reading data");
  c->add_option("--config", a->config,
                "Run config (TOML); see configs/ (required unless --calibrate; with --calibrate: measure for its model)")
      ->transform(existing_config());
  c->add_option("overrides", a->overrides, "Overrides section.key=value, e.g. parallel.zero=2");
  c->add_option("--ranks", a->ranks, "World size (default parallel.dp x tp x pp x cp x ep; else dp = N / (tp x pp x cp x ep))")
      ->check(CLI::PositiveNumber);
  c->add_flag("--json", a->json, "Print the plan as JSON (bytes per rank and category; with --hardware the step "
                                 "time; with --search the ranked layouts)");
  c->add_option("--hardware", a->hardware,
                "Hardware description (TOML, configs/hardware/): also predict the step time on it")
      ->check(CLI::ExistingFile);
  c->add_option("--ranks-per-node", a->ranks_per_node,
                 "With --hardware: ranks on each node (default the file's [node] devices; a CPU machine may run more "
                 "ranks than cores, which then share them)")
      ->check(CLI::PositiveNumber);
  c->add_flag("--search", a->search,
              "Rank every valid layout on --ranks N by predicted tokens/s (needs --hardware; keeps the model, "
              "seq_len and train.batch_tokens)");
  c->add_option("--top", a->top, "--search: how many layouts to list (0 = all; default 20)")->check(CLI::NonNegativeNumber);
  c->add_flag("--calibrate", a->calibrate,
              "Measure this machine (GEMM, attention, memory, op overhead; all-reduce per group size under mpirun) "
              "and write a hardware file");
  c->add_flag("--quick", a->quick, "--calibrate: measure briefly (~0.1 s; as `tessera train` does at start)");
  c->add_option("--out", a->out, "--calibrate: the file to write (default: print it)");
  c->add_option("--name", a->name, "--calibrate: the name written into the file");
  return [a] { return run_plan(*a); };
}

}  // namespace tessera::cli
