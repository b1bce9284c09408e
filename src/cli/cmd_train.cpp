// tessera train --config run.toml [section.key=value ...] [--resume]: one process or an mpirun job.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "backend/cpu_isa.h"
#include "train/step_time_report.h"
#include "core/exit_codes.h"
#include "core/log.h"
#include "train/heartbeat_file.h"
#include "train/preemption.h"
#include "config/run_config.h"
#include "train/trainer.h"

namespace tessera::cli {

namespace {
struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string resume;  // "" (start fresh), "latest" (--resume) or "auto" (--resume auto)
  bool quiet = false, json = false, verify_replicas = false;
  std::string trace;
  int64_t stop_after = -1;
};

// --json: the run's outcome for scripts, one object on stdout (progress and logs stay off stdout).
nlohmann::json summary_json(const TrainSummary& s, const RunConfig& cfg, int world_size) {
  nlohmann::json j = {{"out_dir", cfg.train.out_dir},
                      {"ranks", world_size},
                      {"first_step", s.first_step},
                      {"last_step", s.last_step},
                      {"steps_run", s.losses.size()},
                      {"final_loss", s.losses.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.losses.back())},
                      {"final_val_loss", s.final_val_loss < 0 ? nlohmann::json(nullptr) : nlohmann::json(s.final_val_loss)},
                      {"tokens_per_s", s.tokens_per_s},
                      {"loader_wait_fraction", s.loader_wait_fraction},
                      {"exposed_comm_fraction", s.exposed_comm_fraction},
                      {"predicted_step_s", s.predicted_step_s},
                      {"measured_step_s", s.measured_step_s}};
  return j;
}

int run_train(const TrainArgs& a) {
  MpiRuntime mpi;
  // SIGTERM/SIGINT/SIGUSR1: stop after the current step with a checkpoint. Installed after MPI_Init
  // (which leaves these signals alone in Open MPI 4.1) and before any compute thread starts (the
  // auto layout's measurement below already runs oneDNN).
  PreemptionSignals stop_signals;
  const bool multi = mpi.world_size() > 1;
  if (multi) set_log_rank(mpi.world_rank());
  // On a many-rank job an error on one rank must end the whole job, not leave the others waiting.
  HeartbeatFile* beat_on_failure = nullptr;
  auto fail_job = [&](const Status& s, int code) -> int {
    if (beat_on_failure) beat_on_failure->beat("failed", -1, s.message());
    // Peers stuck on the same timed-out op time out within milliseconds of this rank: give them
    // time to print their own diagnosis before mpirun kills them.
    if (multi && s.code() == StatusCode::timeout) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    if (multi) mpi.end_job_on_error(s, code);
    fail(s.message());
    return code;
  };
  auto fail_job_on = [&](const Status& s) { return fail_job(s, exit_code_for(s)); };
  // Checked here rather than while parsing, so that every rank of a job that lacks it is named once.
  if (const std::string missing = missing_config_message(a.config); !missing.empty())
    return fail_job(Status(StatusCode::not_found, missing), exit_code(ExitCode::usage));
  auto cfg = load_run_config_for_world(a.config, a.overrides, mpi.world_size());
  if (!cfg.ok()) return fail_job_on(cfg.status());
  // The launcher watches this file: an error must say so before the job ends.
  const LaunchEnvironment launch = LaunchEnvironment::read();
  HeartbeatFile heartbeat =
      HeartbeatFile::open(launch.heartbeat_dir, mpi.world_rank(), mpi.world_size(), cfg->train.out_dir, launch.attempt);
  beat_on_failure = &heartbeat;
  const char* env_hardware = std::getenv(kHardwareEnvVar);
  const std::string hardware_file = env_hardware ? env_hardware : "";
  CommOptions co;
  co.timeout_s = cfg->train.timeout_s;
  auto world = MpiCommunicator::create_world(co);
  if (!world.ok()) return fail_job_on(world.status());
  if (cfg->parallel.layout == "auto") {  // the fastest predicted layout, chosen before anything is built
    // The kernels' level first: the measurement is this process's first oneDNN call (cpu_isa.h).
    if (Status st = select_cpu_isa(cfg->train.cpu_isa); !st.ok()) return fail_job_on(st);
    auto hw = hardware_for_run(*cfg, **world, mpi.ranks_on_this_node(), {hardware_file, 0});
    if (!hw.ok()) return fail_job_on(hw.status());
    auto chosen = choose_auto_layout(*cfg, **world, *hw);
    if (!chosen.ok()) return fail_job_on(chosen.status());
    std::vector<std::string> o = a.overrides;
    o.insert(o.end(), chosen->overrides.begin(), chosen->overrides.end());
    cfg = load_run_config_for_world(a.config, o, mpi.world_size());
    if (!cfg.ok()) return fail_job_on(cfg.status());
    if (mpi.world_rank() == 0 && !a.json) std::printf("%s\n", chosen->why.c_str());
  }
  TrainerOptions opts;
  opts.resume = a.resume == "latest";
  opts.resume_auto = launch.resume_auto || a.resume == "auto";
  opts.launch_attempt = launch.attempt;
  opts.heartbeat_dir = launch.heartbeat_dir;
  opts.fault_spec = launch.fault_spec;
  opts.hardware_file = hardware_file;
  opts.quiet = a.quiet || a.json;
  opts.json_summary = a.json;
  opts.trace_path = a.trace;
  opts.stop_after_steps = a.stop_after;
  opts.verify_replicas = a.verify_replicas;
  opts.ranks_per_node = mpi.ranks_on_this_node();
  opts.rank_on_node = mpi.rank_on_this_node();
  opts.stop_signal = &stop_signals.received();
  auto summary = run_training(cfg.value(), *world.value(), opts);
  if (!summary.ok()) return fail_job_on(summary.status());
  if (!summary->lost_workers.empty()) {
    // A lost worker hangs or is gone: MPI_Finalize (and freeing the world's window) would wait for it
    // for ever (or, under mpirun --enable-recovery, hang about every other time). The survivors are
    // done and their last checkpoint complete: the first of them ends the job, taking a hung worker
    // with it. (Under --enable-recovery mpirun exits 0 whatever a rank returns: read the report.)
    // With spares in every lost place and no preemption the run is complete: the abort carries 0.
    world.value()->abandon();
    const bool complete = summary->every_lost_worker_replaced() && summary->stop_signal == 0;
    const int code = exit_code(complete ? ExitCode::ok : ExitCode::communication);
    if (!summary->lost_report.empty()) {
      std::fprintf(stderr, "warning: %s (the job ends with exit code %d through MPI_Abort: MPI cannot finalize a job that lost a rank)\n",
                   summary->lost_report.c_str(), code);
      std::fflush(stderr);
      std::fflush(stdout);
      MPI_Abort(MPI_COMM_WORLD, code);
    }
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(5));  // the first survivor's MPI_Abort ends this process
    std::_Exit(code);
  }
  const bool preempted = summary->stop_signal != 0;
  if (a.json && mpi.world_rank() == 0) {
    nlohmann::json j = summary_json(*summary, *cfg, mpi.world_size());
    j["preempted"] = preempted ? nlohmann::json{{"signal", stop_signal_name(summary->stop_signal)},
                                                {"checkpoint", summary->preempted_checkpoint}}
                               : nlohmann::json(nullptr);
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  if (!preempted) return 0;
  if (mpi.world_rank() == 0) {
    // stderr, unbuffered: mpirun may end the other processes as soon as one exits non-zero.
    std::fprintf(stderr, "stopping after step %lld on %s: checkpoint %s written; resume with --resume (exit code %d)\n",
                 static_cast<long long>(summary->last_step), stop_signal_name(summary->stop_signal).c_str(),
                 summary->preempted_checkpoint.c_str(), exit_code(ExitCode::preempted));
  }
  return exit_code(ExitCode::preempted);
}
}  // namespace

Runner add_train(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* c = app.add_subcommand("train", "Train a model from a TOML run config (under mpirun for many ranks)");
  c->add_option("--config", a->config, "Run config (TOML); see configs/")->required()->transform(installed_config());
  c->add_option("overrides", a->overrides, "Overrides section.key=value, e.g. train.steps=20");
  // A flag, so `--resume section.key=value` keeps meaning what it always did; main() turns
  // `--resume auto` into `--resume=auto`.
  c->add_flag("--resume{latest}", a->resume,
              "Continue from the latest complete checkpoint in train.out_dir; `--resume auto`: only if one exists "
              "(else start fresh)")
      ->check(CLI::IsMember({"latest", "auto"}));
  c->add_flag("--quiet", a->quiet, "No progress lines (the final summary is still printed)");
  c->add_flag("--json", a->json, "Print the final summary as one JSON object on stdout, and nothing else there");
  c->add_option("--trace", a->trace, "Write a Chrome trace-event timeline of the job (open in Perfetto)");
  c->add_option("--stop-after", a->stop_after, "Stop (with a checkpoint) after this many steps");
  c->add_flag("--verify-replicas", a->verify_replicas,
              "Check after every step that all data-parallel replicas hold bitwise-identical parameters");
  return [a] { return run_train(*a); };
}

}  // namespace tessera::cli
