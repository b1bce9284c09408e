// tessera launch [options] -- <mpirun|srun line>: the elastic launcher (launch/launcher.h). Starts
// the job, watches the ranks' heartbeats, and restarts it from the latest checkpoint when a rank
// dies or hangs, with as many ranks as the slots file allows; a SIGTERM/SIGINT/SIGUSR1 to it makes
// the job stop with a checkpoint (exit code 75, preempted).
#include <memory>

#include "cli/commands.h"
#include "launch/launcher.h"

namespace tessera::cli {

Runner add_launch(CLI::App& app) {
  auto o = std::make_shared<launch::LaunchOptions>();
  CLI::App* c = app.add_subcommand(
      "launch",
      "Run an mpirun/srun job and restart it from its latest checkpoint when a rank dies or stops making "
      "progress: tessera launch [options] -- mpirun -n 4 tessera train --config run.toml");
  c->add_option("--min-ranks", o->min_ranks, "Fewest ranks to (re)start the job with (default 1)")
      ->check(CLI::PositiveNumber);
  c->add_option("--max-ranks", o->max_ranks, "Most ranks to start the job with (default: the command's -n)")
      ->check(CLI::PositiveNumber);
  c->add_option("--max-restarts", o->max_restarts, "Restarts after failures before giving up (default 3)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--heartbeat-timeout", o->heartbeat_timeout,
                "Seconds a training rank may go without progress before the job is restarted (default 120)")
      ->check(CLI::PositiveNumber);
  c->add_option("--startup-timeout", o->startup_timeout,
                "Seconds a rank may spend in set-up, first heartbeat included (default: --heartbeat-timeout)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--grace", o->grace, "Seconds between SIGTERM and SIGKILL when ending the job (default 10)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--stop-timeout", o->stop_timeout,
                "Seconds the job gets to save a checkpoint and exit after a SIGTERM, SIGINT or SIGUSR1 to the "
                "launcher, which passes it on (default 300); keep it below the scheduler's warning time")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--slots-file", o->slots_file,
                "File with the number of usable slots (an integer or an Open MPI hostfile; re-read before "
                "every start); the job is started with min(slots, --max-ranks) ranks");
  c->add_option("--wait-for-slots", o->wait_for_slots,
                "Seconds to wait for --min-ranks slots before giving up (default 0)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--run-dir", o->run_dir,
                "The run's train.out_dir: restarts are logged to <run-dir>/launch/restarts.jsonl (default: "
                "learned from rank 0's heartbeat)");
  c->add_option("--heartbeat-dir", o->heartbeat_dir,
                "Directory for the ranks' heartbeat files, on a file system all nodes share (default "
                "<run-dir>/launch/heartbeats, else a new directory under $TMPDIR)");
  c->add_option("--poll-interval", o->poll_interval, "Seconds between heartbeat checks (default 0.2)")
      ->check(CLI::PositiveNumber);
  // Not ->required(): run_launch names the missing command with an example.
  c->add_option("command", o->command, "The job: an mpirun/mpiexec/srun command line, after '--'");
  return [o] { return launch::run_launch(*o); };
}

}  // namespace tessera::cli
