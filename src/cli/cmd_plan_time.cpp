// `tessera plan --hardware / --search / --calibrate`: printing the step-time model's predictions and
// writing measured hardware files (plan/step_time_model.h, plan/layout_search.h, plan/calibrate.h).
#include "cli/cmd_plan_time.h"

#include <omp.h>

#include <cstdio>
#include <fstream>

#include "cli/commands.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "plan/calibrate.h"
#include "plan/layout_search.h"
#include "plan/memory_plan.h"
#include "plan/step_time_json.h"

namespace tessera::cli {

void print_step_time(const StepTimePrediction& p, const HardwareSpec& hw) {
  const StepTimeBreakdown& b = p.breakdown;
  auto pct = [&](double s) { return p.step_s > 0 ? 100 * s / p.step_s : 0.0; };
  std::printf("predicted step time on %s: %.4g s, %.4g tokens/s, %.3g TFLOP/s per device (MFU %.1f%%)\n",
              hw.name.empty() ? "this hardware" : hw.name.c_str(), p.step_s, p.tokens_per_s,
              p.flops_per_device / 1e12, 100 * p.mfu);
  std::printf("  compute     %10.4g s %5.1f%%  (recompute %.4g s)\n", b.compute_s, pct(b.compute_s), b.recompute_s);
  std::printf("  bubble      %10.4g s %5.1f%%\n", b.bubble_s, pct(b.bubble_s));
  std::printf("  tp comm     %10.4g s %5.1f%%\n", b.tp_s, pct(b.tp_s));
  std::printf("  pp comm     %10.4g s %5.1f%%\n", b.pp_s, pct(b.pp_s));
  std::printf("  dp comm     %10.4g s %5.1f%%  (exposed of %.4g s)\n", b.dp_s, pct(b.dp_s), b.dp_total_s);
  std::printf("  optimizer   %10.4g s %5.1f%%\n", b.optimizer_s, pct(b.optimizer_s));
  std::printf("  other       %10.4g s %5.1f%%\n", b.other_s, pct(b.other_s));
}

int run_plan_search(const RunConfig& cfg, int world, const HardwareSpec& hw, bool json, int top) {
  auto search = search_layouts(cfg, world, hw);
  if (!search.ok()) return fail(search.status());
  const LayoutSearch& s = *search;
  const size_t n = top > 0 ? std::min(s.ranked.size(), static_cast<size_t>(top)) : s.ranked.size();
  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (size_t i = 0; i < n; ++i) {
      const LayoutCandidate& c = s.ranked[i];
      nlohmann::json j = step_time_json(c.time);
      j["rank"] = i + 1;
      j["layout"] = c.time.layout.describe();
      j["overrides"] = c.overrides;
      j["dp"] = c.cfg.parallel.dp;
      j["tp"] = c.cfg.parallel.tp;
      j["pp"] = c.cfg.parallel.pp;
      j["cp"] = c.cfg.parallel.cp;
      j["cp_mode"] = c.cfg.parallel.cp_mode;
      j["ep"] = c.cfg.parallel.ep;
      j["schedule"] = pipeline_schedule_name(c.cfg.parallel.schedule);
      j["virtual_stages"] = c.cfg.parallel.virtual_stages;
      j["zero"] = c.cfg.parallel.zero;
      j["sequence_parallel"] = c.cfg.parallel.sequence_parallel;
      j["micro_batch"] = c.cfg.train.micro_batch;
      j["grad_accum"] = c.cfg.train.grad_accum;
      j["recompute"] = recompute_name(c.cfg.train.recompute);
      j["peak_memory_bytes"] = c.peak_bytes;
      list.push_back(j);
    }
    nlohmann::json out = {{"hardware", hw.name}, {"ranks", world}, {"budget_bytes", s.budget_bytes},
                          {"enumerated", s.enumerated}, {"over_budget", s.over_budget}, {"candidates", list}};
    std::printf("%s\n", out.dump(1).c_str());
    return 0;
  }
  std::printf("tessera plan --search: %s on %d ranks, %s; %d valid layouts, %d over the memory budget of %s MiB; "
              "fastest first:\n",
              cfg.model.name.c_str(), world, hw.name.empty() ? "this hardware" : hw.name.c_str(), s.enumerated,
              s.over_budget, format_mib(s.budget_bytes).c_str());
  std::printf("%4s %10s %12s %8s %8s %8s %8s %8s %10s  %s\n", "#", "step s", "tokens/s", "compute", "bubble", "comm",
              "optim", "MFU %", "peak MiB", "layout");
  for (size_t i = 0; i < n; ++i) {
    const LayoutCandidate& c = s.ranked[i];
    const StepTimeBreakdown& b = c.time.breakdown;
    std::printf("%4zu %10.4g %12.4g %8.3g %8.3g %8.3g %8.3g %8.1f %10s  %s\n", i + 1, c.time.step_s,
                c.time.tokens_per_s, b.compute_s, b.bubble_s, b.tp_s + b.pp_s + b.dp_s, b.optimizer_s,
                100 * c.time.mfu, format_mib(c.peak_bytes).c_str(), short_layout_name(c.cfg).c_str());
  }
  if (n < s.ranked.size()) std::printf("(%zu more; --top 0 lists all)\n", s.ranked.size() - n);
  std::printf("best: %s\n", s.ranked.front().overrides.c_str());
  return 0;
}

int run_plan_calibrate(const std::string& out, const std::string& name, bool quick, const RunConfig* run) {
  MpiRuntime mpi;
  auto world = MpiCommunicator::create_world();
  if (!world.ok()) return fail(world.status());
  omp_set_num_threads(1);  // one rank = one core with train.threads = 1 (the device the file describes)
  CalibrationOptions o;
  o.quick = quick;
  if (run) aim_calibration_at(o, *run);
  auto machine = calibrate_machine(**world, o, mpi.ranks_on_this_node());
  if (!machine.ok()) return fail(machine.status());
  HardwareSpec h = std::move(machine).value();
  h.name = name;
  if (mpi.world_rank() != 0) return 0;
  const std::string text = "# Measured by `tessera plan --calibrate` on " + std::to_string(mpi.world_size()) +
                           " rank(s); one device = one rank with one thread.\n" + hardware_to_toml(h);
  if (out.empty() || out == "-") {
    std::printf("%s", text.c_str());
    return 0;
  }
  std::ofstream f(out);
  if (!(f << text)) return fail("cannot write " + out + ": check the directory exists and is writable");
  std::printf("wrote %s (peak %.1f GFLOP/s, memory %.1f GB/s, op overhead %.2f us, %zu collective row(s))\n",
              out.c_str(), h.peak_flops_fp32 / 1e9, h.memory_bandwidth / 1e9, h.op_overhead_s * 1e6,
              h.measured.size());
  return 0;
}

}  // namespace tessera::cli
