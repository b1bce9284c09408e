// tessera <command>: parses the command line and dispatches; each command lives in its own file.
#include <cstdio>
#include <map>

#include "cli/commands.h"

int main(int argc, char** argv) {
  using namespace tessera::cli;
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
  reg(add_config);
  // CLI11 would only say "A subcommand is required" for a mistyped command: name it and the choices.
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known = known || sub->get_name() == argv[1];
    }
    if (!known) return fail(std::string("unknown command '") + argv[1] + "': use one of " + names + " (see --help)");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, run] : runners)
    if (sub->parsed()) return run();
  return 1;
}
