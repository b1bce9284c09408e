// Heartbeat files: one small JSON document per rank, replaced atomically on each beat.
#include "train/heartbeat_file.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/log.h"

namespace tessera {
namespace {
double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

LaunchEnvironment LaunchEnvironment::read() {
  LaunchEnvironment e;
  const char* resume = std::getenv("TESSERA_RESUME");
  e.resume_auto = resume && std::string_view(resume) == "auto";
  const char* attempt = std::getenv("TESSERA_LAUNCH_ATTEMPT");
  e.attempt = attempt ? std::atoi(attempt) : 0;
  const char* dir = std::getenv("TESSERA_HEARTBEAT_DIR");
  e.heartbeat_dir = dir ? dir : "";
  const char* fault = std::getenv("TESSERA_FAULT");
  e.fault_spec = fault ? fault : "";
  return e;
}

HeartbeatFile HeartbeatFile::open(const std::string& dir, int rank, int world_size, std::string out_dir, int attempt) {
  HeartbeatFile h;
  if (dir.empty()) return h;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  h.path_ = dir + "/rank_" + std::to_string(rank) + ".json";
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  h.host_ = host;
  h.out_dir_ = std::move(out_dir);
  h.rank_ = rank;
  h.world_size_ = world_size;
  h.attempt_ = attempt;
  return h;
}

void HeartbeatFile::beat(std::string_view phase, int64_t step, std::string_view message) {
  if (path_.empty()) return;
  if (step < 0) {  // unknown here (e.g. the CLI reporting a failure): keep the last step written
    std::ifstream in(path_);
    const nlohmann::json last = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    step = last.is_object() ? last.value("step", int64_t{0}) : 0;
  }
  const nlohmann::json j = {{"rank", rank_},   {"world_size", world_size_},     {"host", host_},
                            {"pid", ::getpid()}, {"attempt", attempt_},         {"step", step},
                            {"phase", phase},  {"time", unix_seconds()}, {"out_dir", out_dir_},
                            {"message", message}};
  const std::string tmp = path_ + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  bool ok = f != nullptr;
  if (f) {
    const std::string text = j.dump() + "\n";
    ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    ok = (std::fclose(f) == 0) && ok;
  }
  ok = ok && std::rename(tmp.c_str(), path_.c_str()) == 0;
  if (!ok && !warned_) {
    warned_ = true;
    log_warn("cannot write heartbeat file " + path_ + " (the launcher may think this rank is stuck)");
  }
}

}  // namespace tessera
