// tessera data ledger RUN: checks a run's sample ledger (train.sample_ledger) -- every sample of the
// stream seen exactly once, in the stream's order, across restarts, resumes and world-size changes.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "data/sample_ledger.h"

namespace tessera::cli {
namespace {

int run_ledger(const std::string& run_dir, bool json) {
  auto r = check_sample_ledger(run_dir);
  if (!r.ok()) return fail(r.status());
  const LedgerReport& rep = *r;
  if (json) {
    std::printf("%s\n", rep.to_json().dump().c_str());
    return rep.ok() ? 0 : 1;
  }
  std::printf("%s: %d run(s), %lld samples recorded, %lld voided (steps a later run rolled back), %lld used\n",
              run_dir.c_str(), rep.runs, (long long)rep.recorded, (long long)rep.voided, (long long)rep.counted);
  std::printf("epochs of %llu windows: %lld complete, %lld positions of the next\n",
              (unsigned long long)rep.windows, (long long)rep.complete_epochs, (long long)rep.last_epoch_positions);
  auto list = [](const char* what, int64_t count, const std::vector<std::string>& lines) {
    if (count == 0) return;
    std::printf("%lld %s:\n", (long long)count, what);
    for (const std::string& l : lines) std::printf("  %s\n", l.c_str());
    if (count > static_cast<int64_t>(lines.size()))
      std::printf("  ... and %lld more\n", (long long)(count - static_cast<int64_t>(lines.size())));
  };
  list("samples seen more than once", rep.duplicate_count, rep.duplicates);
  list("samples never seen", rep.missing_count, rep.missing);
  list("samples out of the stream's order", rep.misplaced_count, rep.misplaced);
  std::printf("%s\n", rep.ok() ? "exactly once: every sample up to the last one used, once, in the stream's order"
                               : "NOT exactly once (see above)");
  return rep.ok() ? 0 : 1;
}

}  // namespace

Runner add_data(CLI::App& app) {
  struct Args {
    std::string run;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("data", "Check what a run's training consumed");
  CLI::App* led = c->add_subcommand(
      "ledger",
      "Check a run's sample ledger (train.sample_ledger = true): after voiding the steps a later resume rolled "
      "back, every sample up to the last one used must have been seen exactly once, where the stream puts it. "
      "Prints any sample seen twice, never, or out of order. Exit status 0 when exactly once, 1 otherwise");
  led->add_option("run", a->run, "The run directory (train.out_dir)")->required();
  led->add_flag("--json", a->json, "Machine-readable output on stdout (one JSON object)");
  return [a, led] {
    if (led->parsed()) return run_ledger(a->run, a->json);
    return fail("tessera data needs a subcommand: ledger (see tessera data --help)");
  };
}

}  // namespace tessera::cli
