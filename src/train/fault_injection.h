// Fault injection for tests and drills, from the environment variable TESSERA_FAULT: crash, hang or
// slow a chosen rank at a chosen step, corrupt or truncate its checkpoint shard, or make its
// checkpoint write fail as on a full disk. Unset (every normal run): nothing is injected.
//
//   TESSERA_FAULT="crash:rank=2:step=5,corrupt_shard:rank=0:step=10:attempt=1"
//   crash           SIGKILL itself at the start of step S (a lost rank; no clean-up runs)
//   hang            stop making progress at the start of step S (peers wait in its gradient
//                   communication; heartbeats stop)
//   hang_after_update  stop making progress after the update of step S (peers wait in the step's
//                   loss average)
//   fail            end step S with an error on rank R (the other ranks must be told, not hang)
//   perturb         nudge one parameter by one ulp after the update of step S (--verify-replicas
//                   must name the divergence)
//   slow            from step S on, stretch each step to `factor` times its own compute (factor=2;
//                   measured as the thread's CPU time, so time descheduled does not count)
//   corrupt_shard   after the checkpoint of step S is complete, flip one byte inside its shard_R.bin
//   truncate_shard  after the checkpoint of step S is complete, cut its shard_R.bin in half
//   disk_full       the checkpoint write of step S fails on rank R with "No space left on device"
//                   after half of its shard is written (as when the disk fills during the save)
//   crash_in_save   SIGKILL itself after writing half of its shard of the checkpoint of step S
//   nan             write NaN into the output of one op of step S: layer=L (-1 = embeddings),
//                   pass=forward|backward, micro_batch=M (0-based), op=NAME (default: the layer's
//                   first op in that pass), e.g. nan:rank=1:step=5:layer=1:pass=backward:micro_batch=2
//   spike           multiply that op's output by factor (default 1000) instead
// Each fault applies only on launch attempt 0 (TESSERA_LAUNCH_ATTEMPT, set by `tessera launch`)
// unless it names another with attempt=K, so a restarted job does not meet the same fault again.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/numerics_probe.h"
#include "train/step_hooks.h"

namespace tessera {

enum class FaultKind {
  crash, hang, hang_after_update, fail, perturb, slow, corrupt_shard, truncate_shard, disk_full, crash_in_save,
  nan, spike
};

struct Fault {
  FaultKind kind = FaultKind::crash;
  int rank = 0;
  int64_t step = 1;
  int attempt = 0;
  double factor = 2.0;  // slow (default 2) and spike (default 1000)
  // nan and spike: where in the model (see model/numerics_probe.h)
  int layer = 0;
  ModelPass pass = ModelPass::forward;
  int micro_batch = 0;
  std::string op;  // empty: the layer's first probed op in that pass
};

// Parses a TESSERA_FAULT value; errors name the bad item and the accepted forms.
Result<std::vector<Fault>> parse_faults(std::string_view spec);

// The faults of one rank on this launch attempt, acting at the step hooks (crash, hang, slow) and
// around checkpoints (the rest). Wraps the hooks that were there before (they still run).
// A shard write cut short after `at` of its bytes (at < 0: not at all): fails as on a full disk, or
// with `kill` the rank SIGKILLs itself there.
struct ShardWriteFault {
  double at = -1;
  bool kill = false;
};

class FaultInjection final : public StepHooks {
 public:
  // From a TESSERA_FAULT spec (LaunchEnvironment::fault_spec; "" = none; a malformed one is an error);
  // attempt: the launch attempt.
  static Result<std::unique_ptr<FaultInjection>> from_spec(std::string_view spec, int rank, int attempt,
                                                           std::unique_ptr<StepHooks> inner);
  FaultInjection(std::vector<Fault> faults, int rank, int attempt, std::unique_ptr<StepHooks> inner);

  Status at(StepPoint point, int64_t step, ParamStore& store) override;
  // How this rank's shard write of the checkpoint of `step` is cut short (disk_full, crash_in_save).
  ShardWriteFault shard_write_fault(int64_t step) const;
  // After the checkpoint of `step` is complete in `checkpoint_dir`: corrupts or truncates this
  // rank's shard when a fault says so.
  Status after_checkpoint(int64_t step, const std::string& checkpoint_dir) const;
  // Whether after_checkpoint does anything for `step` on this rank.
  bool damages_checkpoint(int64_t step) const;
  // This rank's nan / spike faults (injected through the model's numerics probe).
  std::vector<Fault> numerics_faults() const;
  // Told the step at each step_begin (for the probe that injects numerics_faults; may be null).
  void set_numerics_probe(class NumericsFaultProbe* probe) { numerics_probe_ = probe; }

 private:
  const Fault* find(FaultKind kind, int64_t step) const;  // this rank's fault of that kind at that step
  std::vector<Fault> faults_;  // this rank's, this attempt's
  int rank_;
  std::unique_ptr<StepHooks> inner_;
  double step_start_ = 0;  // thread CPU seconds at the step's start
  class NumericsFaultProbe* numerics_probe_ = nullptr;
};

}  // namespace tessera
