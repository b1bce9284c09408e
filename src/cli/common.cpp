// Shared helpers of the commands.
#include <cstdio>
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

CLI::Validator existing_config() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        std::error_code ec;
        path = resolve_config_path(path);  // the command reads the path the validator found
        if (std::filesystem::is_regular_file(path, ec)) return "";
        return "no config file " + path + " (looked here and in " + (install_share_dir() / path).string() +
               "); the shipped configs are in configs/ of the source tree or " +
               (install_share_dir() / "configs").string();
      },
      "FILE");
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
