// Shared helpers of the commands.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "cli/commands.h"
#include "core/exit_codes.h"

namespace tessera::cli {

namespace {
// <prefix>/share/tessera for the running binary at <prefix>/bin/tessera.
std::filesystem::path install_share_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return exe.parent_path().parent_path() / "share" / "tessera";
}
}  // namespace

std::string resolve_config_path(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) || std::filesystem::path(path).is_absolute()) return path;
  const std::filesystem::path installed = install_share_dir() / path;
  return std::filesystem::is_regular_file(installed, ec) ? installed.string() : path;
}

std::string missing_config_message(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return "";
  const std::string looked =
      std::filesystem::path(path).is_absolute() ? "" : " (looked here and in " + (install_share_dir() / path).string() + ")";
  return "no config file " + path + looked + "; the shipped configs are in configs/ of the source tree or " +
         (install_share_dir() / "configs").string();
}

CLI::Validator existing_config() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        path = resolve_config_path(path);  // the command reads the path the validator found
        return missing_config_message(path);
      },
      "FILE");
}

CLI::Validator installed_config() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        path = resolve_config_path(path);
        return "";
      },
      "FILE");
}

int launched_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return 0;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return exit_code(ExitCode::failure);
}

int fail(const Status& status) {
  fail(status.message());
  return exit_code_for(status);
}

}  // namespace tessera::cli
