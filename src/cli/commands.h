// The subcommands of `tessera`; each registers itself on the CLI11 app and runs when selected.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "core/status.h"

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
Runner add_data(CLI::App& app);

// `tessera --version`: version, build and CPU kernel level (version.cpp).
std::string version_text();

// A --config path as given, or else the shipped config of that relative path installed beside the
// command (<prefix>/share/tessera/configs/...), so `--config configs/tiny.toml` works from anywhere.
std::string resolve_config_path(const std::string& path);
// A CLI11 validator: the config exists as given or installed; it replaces the option's value with
// the path found (resolve_config_path), so a command reads its --config as it is.
CLI::Validator existing_config();
// As existing_config(), but a missing file is left for the command to report (tessera train checks
// it once MPI is up, so that a many-rank job prints it once); missing_config_message() says it.
CLI::Validator installed_config();
std::string missing_config_message(const std::string& path);  // "" when the file exists

// This process's rank in an mpirun (or other PMI) launch; 0 outside one. The command line is the
// same on every rank, so only rank 0 prints a mistake in it.
int launched_rank();

// Prints "error: <message>" to stderr and returns 1 (ExitCode::failure).
int fail(const std::string& message);
// Prints "error: <message>" and returns the exit code of the error's kind (core/exit_codes.h).
int fail(const Status& status);

}  // namespace tessera::cli
