// Progress heartbeats for the elastic launcher (`tessera launch`): when TESSERA_HEARTBEAT_DIR is
// set, each rank r replaces <dir>/rank_<r>.json (write to a temporary file, then rename) whenever it
// makes progress: {"rank", "world_size", "host", "pid", "attempt", "step", "phase", "time",
// "out_dir", "message"}. A stuck rank writes nothing, so an old "time" means no progress.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

// What `tessera launch` tells every rank through the environment, read once per process.
// What `tessera launch` (and the fault drills) tell a training process through its environment,
// read once at the command's entry; nothing below it reads the environment.
struct LaunchEnvironment {
  bool resume_auto = false;   // TESSERA_RESUME=auto
  int attempt = 0;            // TESSERA_LAUNCH_ATTEMPT: 0 for the first start
  std::string heartbeat_dir;  // TESSERA_HEARTBEAT_DIR: "" = no heartbeat files
  std::string fault_spec;     // TESSERA_FAULT (train/fault_injection.h): "" = no planted faults
  static LaunchEnvironment read();
};

class HeartbeatFile {
 public:
  // Disabled (every beat a no-op) when dir is empty (LaunchEnvironment::heartbeat_dir).
  static HeartbeatFile open(const std::string& dir, int rank, int world_size, std::string out_dir, int attempt);
  // phase: "setup", "train", "checkpoint", "done", "failed" (with the error as message) or
  // "preempted" (a stop signal: saving the step's checkpoint; once written, its path as message).
  // step < 0: unknown; the step of the rank's last beat is kept.
  // Failures to write are logged once and otherwise ignored: heartbeats must never stop training.
  void beat(std::string_view phase, int64_t step, std::string_view message = {});

 private:
  std::string path_;  // <dir>/rank_<r>.json
  std::string host_, out_dir_;
  int rank_ = 0, world_size_ = 1, attempt_ = 0;
  bool warned_ = false;
};

}  // namespace tessera
