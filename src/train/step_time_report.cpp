// Hardware for a run's prediction, the automatic layout, and predicted vs measured step time.
#include "train/step_time_report.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "comm/agreement.h"
#include "plan/calibrate.h"
#include "plan/layout_search.h"
#include "plan/step_time_json.h"

namespace tessera {

namespace {

Status agree(Communicator& world, const Status& local) {
  int32_t bad = local.ok() ? 0 : 1, any_bad = 0;
  TS_RETURN_IF_ERROR(world.all_reduce(&bad, &any_bad, 1, DType::i32, ReduceOp::max));
  if (!local.ok()) return local;
  if (any_bad) return invalid_argument("another rank failed to read train.hardware (see its message)");
  return Status::ok_status();
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// The time of the step's parts that the runner runs (everything but the dp reduction, optimizer, other).
double predicted_runner_s(const StepTimeBreakdown& b) { return b.compute_s + b.bubble_s + b.tp_s + b.cp_s + b.ep_s + b.pp_s; }
double predicted_pipeline_wait_s(const StepTimeBreakdown& b) { return b.bubble_s + b.pp_s; }

double measured_runner_s(const MeasuredStep& m) {
  return std::max(0.0, m.step_s - m.comm_wait_s - m.loader_wait_s - m.update_s);
}
// What the busiest stage's compute leaves of the runner's time: its waits on the other stages.
double measured_pipeline_wait_s(const MeasuredStep& m) { return std::max(0.0, measured_runner_s(m) - m.busiest_compute_s); }

}  // namespace

Result<HardwareSpec> hardware_for_run(const RunConfig& cfg, Communicator& world, int ranks_per_node,
                                      const RunHardwareDefaults& defaults) {
  // Launchers forward the environment to remote nodes only when told to (mpirun -x): ranks that
  // disagree would take different branches below, whose collectives do not match.
  if (cfg.train.hardware.empty())
    TS_RETURN_IF_ERROR(check_agreement(
        world, std::string(kHardwareEnvVar) + " (set it for every rank, e.g. mpirun -x " + kHardwareEnvVar + ")",
        agreement_hash(defaults.file)));
  const bool from_env = cfg.train.hardware.empty();
  const std::string& file = from_env ? defaults.file : cfg.train.hardware;
  if (!file.empty()) {
    Result<HardwareSpec> h = load_hardware(file);
    if (!h.ok() && from_env)
      h = Status(h.status().code(), std::string(kHardwareEnvVar) + " (the hardware file for runs without train.hardware): " +
                                         h.status().message() + "; fix the path or unset " + kHardwareEnvVar +
                                         " to measure this machine at start");
    TS_RETURN_IF_ERROR(agree(world, h.status()));
    // A CPU machine's file: this run's ranks on the node are the ones sharing its cores.
    if (h->cores_per_node > 0 && ranks_per_node > 0) h->devices_per_node = ranks_per_node;
    return h;
  }
  // Each rank measures with the threads it will train with (training_setup.cpp's choice).
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  omp_set_num_threads(cfg.train.threads > 0 ? cfg.train.threads : std::max(1, cores / std::max(1, ranks_per_node)));
  CalibrationOptions o;
  o.quick = true;
  o.sgemm_peak_gflops = defaults.sgemm_peak_gflops;
  aim_calibration_at(o, cfg);
  TS_ASSIGN_OR_RETURN(HardwareSpec h, calibrate_machine(world, o, ranks_per_node));
  h.name = "this machine (measured at start)";
  return h;
}

Result<AutoLayout> choose_auto_layout(const RunConfig& cfg, Communicator& world, const HardwareSpec& hw) {
  AutoLayout out;
  std::string chosen;  // rank 0: the overrides joined by '\n'; empty on an error
  Status st = Status::ok_status();
  if (world.rank() == 0) {
    Result<LayoutSearch> s = search_layouts(cfg, world.size(), hw);
    if (!s.ok()) {
      st = invalid_argument("parallel.layout = \"auto\": " + s.status().message());
    } else {
      const LayoutCandidate& best = s->ranked.front();
      for (const std::string& o : layout_overrides(best.cfg)) chosen += o + "\n";
      out.why = "parallel.layout = auto: " + short_layout_name(best.cfg) + ", predicted " +
                fmt("%.4g", best.time.tokens_per_s) + " tokens/s on " + hw.name + " (" + best.time.describe() + ")";
      if (s->ranked.size() > 1) {
        const LayoutCandidate& next = s->ranked[1];
        out.why += "; next best " + short_layout_name(next.cfg) + " at " + fmt("%.4g", next.time.tokens_per_s) +
                   " tokens/s";
      }
      out.why += "; " + std::to_string(s->enumerated) + " valid layouts, " + std::to_string(s->over_budget) +
                 " over the memory budget (tessera plan --search lists them)";
    }
  }
  int32_t n = static_cast<int32_t>(st.ok() ? chosen.size() : 0);
  int32_t failed = st.ok() ? 0 : 1;
  TS_RETURN_IF_ERROR(world.broadcast(&failed, 1, DType::i32, 0));
  if (failed) return world.rank() == 0 ? st : invalid_argument("parallel.layout = \"auto\" failed on rank 0 (see its message)");
  TS_RETURN_IF_ERROR(world.broadcast(&n, 1, DType::i32, 0));
  chosen.resize(static_cast<size_t>(n));
  TS_RETURN_IF_ERROR(world.broadcast(chosen.data(), n, DType::u8, 0));
  for (size_t a = 0, b; a < chosen.size(); a = b + 1) {
    b = chosen.find('\n', a);
    out.overrides.push_back(chosen.substr(a, b - a));
  }
  out.overrides.push_back("parallel.layout=manual");
  return out;
}

nlohmann::json predicted_vs_measured_json(const StepTimePrediction& p, const MeasuredStep& m) {
  return {{"predicted", step_time_json(p)},
          {"measured",
           {{"step_s", m.step_s}, {"comm_wait_s", m.comm_wait_s}, {"loader_wait_s", m.loader_wait_s},
            {"update_s", m.update_s}, {"runner_s", measured_runner_s(m)}, {"busiest_compute_s", m.busiest_compute_s},
            {"pipeline_wait_s", measured_pipeline_wait_s(m)}, {"steps", m.steps}}},
          {"predicted_runner_s", predicted_runner_s(p.breakdown)},
          {"predicted_pipeline_wait_s", predicted_pipeline_wait_s(p.breakdown)},
          {"step_error", p.step_s > 0 ? m.step_s / p.step_s - 1 : 0.0}};
}

std::string predicted_vs_measured_line(const StepTimePrediction& p, const MeasuredStep& m) {
  std::string line = "step time: predicted " + fmt("%.4g", p.step_s) + " s, measured " + fmt("%.4g", m.step_s) +
                     " s (" + fmt("%+.1f", 100 * (m.step_s / p.step_s - 1)) + " %); exposed dp communication predicted " +
                     fmt("%.3g", p.breakdown.dp_s) + " s, measured wait " + fmt("%.3g", m.comm_wait_s) +
                     " s; optimizer predicted " + fmt("%.3g", p.breakdown.optimizer_s) + " s, measured " +
                     fmt("%.3g", m.update_s) + " s; runner (compute, tp, pp, bubble) predicted " + fmt("%.4g", predicted_runner_s(p.breakdown)) +
                     " s, measured " + fmt("%.4g", measured_runner_s(m)) + " s";
  if (p.layout.grid.pp > 1)
    line += "; of it the busiest stage's compute (tp included) predicted " +
            fmt("%.4g", p.breakdown.compute_s + p.breakdown.tp_s) + " s, measured " + fmt("%.4g", m.busiest_compute_s) +
            " s, pipeline waits (bubble + pp messages) predicted " + fmt("%.3g", predicted_pipeline_wait_s(p.breakdown)) +
            " s, measured " + fmt("%.3g", measured_pipeline_wait_s(m)) + " s";
  return line;
}

PipelineStageShares pipeline_stage_shares(const GridShape& shape, const std::vector<RankStepTime>& ranks) {
  const auto stages = static_cast<size_t>(shape.pp);
  PipelineStageShares out{std::vector<double>(stages, 0.0), std::vector<double>(stages, 0.0)};
  std::vector<double> count(stages, 0.0);
  for (size_t r = 0; r < ranks.size() && static_cast<int>(r) < shape.world_size(); ++r) {
    const double step = ranks[r].step_s();
    if (step <= 0) continue;
    const auto stage = static_cast<size_t>(grid_coord(shape, static_cast<int>(r)).pp);
    out.idle[stage] += 1 - ranks[r].compute_s / step;
    out.pipeline_wait[stage] += ranks[r].pipeline_wait_s / step;
    count[stage] += 1;
  }
  for (size_t s = 0; s < stages; ++s)
    if (count[s] > 0) out.idle[s] /= count[s], out.pipeline_wait[s] /= count[s];
  return out;
}

std::string pipeline_idle_line(const PipelineStageShares& shares, double equal_stage_bubble) {
  auto percents = [](const std::vector<double>& v) {
    std::string t;
    for (size_t s = 0; s < v.size(); ++s) t += (s ? " / " : "") + fmt("%.1f", 100 * v[s]) + " %";
    return t;
  };
  return "pipeline stages idle " + percents(shares.idle) + " of the step (waiting on the other stages " +
         percents(shares.pipeline_wait) + "); the schedule's bubble with equal stages " +
         fmt("%.1f", 100 * equal_stage_bubble) + " %";
}

}  // namespace tessera
