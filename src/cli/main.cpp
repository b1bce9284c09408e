// tessera <command>: parses the command line and dispatches; each command lives in its own file.
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "core/exit_codes.h"
#include "core/heap_policy.h"

namespace {
// `--resume auto` reads naturally, but a flag cannot take the next word: join the two (only for
// the value `auto`, so `--resume train.steps=9` stays a flag followed by an override).
std::vector<char*> join_resume_auto(int argc, char** argv, std::string& joined) {
  std::vector<char*> out;
  joined = "--resume=auto";
  for (int i = 0; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--resume" && i + 1 < argc && std::string_view(argv[i + 1]) == "auto") {
      out.push_back(joined.data());
      ++i;
    } else {
      out.push_back(argv[i]);
    }
  }
  return out;
}
}  // namespace

int main(int raw_argc, char** raw_argv) {
  using namespace tessera::cli;
  tessera::keep_freed_heap_for_reuse();  // before MPI or a model allocates anything
  std::string joined;
  std::vector<char*> args = join_resume_auto(raw_argc, raw_argv, joined);
  const int argc = static_cast<int>(args.size());
  char** argv = args.data();
  CLI::App app{"Tessera: train transformer language models on one or many processes"};
  app.require_subcommand(1);
  app.set_version_flag("--version", [] { return version_text(); }, "print the version, the build and the CPU level");
  // Command-line mistakes read like every other failure: "error: <message>".
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    return "error: " + CLI::FailureMessage::simple(a, e);
  });
  std::map<CLI::App*, Runner> runners;
  auto reg = [&](Runner (*add)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    Runner r = add(app);
    runners[app.get_subcommands({})[before]] = std::move(r);
  };
  reg(add_prepare);
  reg(add_train);
  reg(add_eval);
  reg(add_sample);
  reg(add_logits);
  reg(add_export);
  reg(add_plot);
  reg(add_plan);
  reg(add_checkpoint);
  reg(add_launch);
  reg(add_data);
  reg(add_config);
  // CLI11 would only say "A subcommand is required" for a mistyped command: name it and the choices.
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known = known || sub->get_name() == argv[1];
    }
    if (!known) {
      fail(std::string("unknown command '") + argv[1] + "': use one of " + names + " (see --help)");
      return tessera::exit_code(tessera::ExitCode::usage);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end here with 0; every command-line mistake gets the one usage code.
    // Under mpirun every rank parses the same command line: rank 0 alone says what is wrong.
    std::ostringstream muted;
    const bool speak = tessera::cli::launched_rank() == 0;
    const int code = speak ? app.exit(e) : app.exit(e, muted, muted);
    // mpirun ends the whole job when the first rank exits non-zero: the silent ranks leave a little
    // later, so that rank 0 (which may have started last) has printed the message by then.
    if (!speak && code != 0) std::this_thread::sleep_for(std::chrono::seconds(2));
    return code == 0 ? 0 : tessera::exit_code(tessera::ExitCode::usage);
  }
  for (auto& [sub, run] : runners)
    if (sub->parsed()) return run();
  return 1;
}
