// The subcommands of `tessera`; each registers itself on the CLI11 app and runs when selected.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace tessera::cli {

// A registered command: run() returns the process exit code.
using Runner = std::function<int()>;

Runner add_prepare(CLI::App& app);
Runner add_train(CLI::App& app);
Runner add_eval(CLI::App& app);
Runner add_sample(CLI::App& app);
Runner add_logits(CLI::App& app);
Runner add_export(CLI::App& app);
Runner add_plot(CLI::App& app);
Runner add_plan(CLI::App& app);
Runner add_checkpoint(CLI::App& app);
Runner add_launch(CLI::App& app);
Runner add_config(CLI::App& app);

// `tessera --version`: version, build and CPU kernel level (version.cpp).
std::string version_text();

// Prints "error: <message>" to stderr and returns 1.
int fail(const std::string& message);

}  // namespace tessera::cli
