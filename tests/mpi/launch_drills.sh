#!/bin/bash
# Fault drills through the real trainer under `tessera launch` (4 ranks, tiny model, 12 steps of
# 768 tokens, a synchronous checkpoint every 3 steps unless a drill says otherwise):
#   sigkill   a random rank is SIGKILLed at a random step; the launcher restarts the job from the
#             latest checkpoint (at most one interval lost) and it ends bitwise equal to an
#             uninterrupted run (exported weights compared exactly)
#   hang      rank 1 stops making progress at step 4; found within the heartbeat timeout, named,
#             restarted, finished bitwise equal
#   corrupt   rank 2's shard of checkpoint 6 is corrupted, then rank 0 dies at step 8: the restart
#             detects the bad checksum, sets the checkpoint aside, falls back to step 3, ends bitwise equal
#   savekill  asynchronous saves; rank 1 dies half-way through writing its shard of checkpoint 6: the
#             restart removes the unfinished save, resumes from step 3, ends bitwise equal
#   diskfull  asynchronous saves; rank 2's disk "fills" during checkpoint 6: that save fails (named),
#             training goes on, the next checkpoints are complete (no launcher); rank 1, set to damage
#             its shard once checkpoint 6 is complete, learns of the failure from rank 0 instead of
#             waiting out the timeout
#   shrink    one slot is removed while rank 3 dies at step 10: the job continues on 3 ranks
#             (parallel.dp = 0, the global batch kept through accumulation) with the loss curve of an
#             uninterrupted 3-rank continuation from the same checkpoint (<= 1e-5)
#   launch_drills.sh <tessera> <data_dir> <work_dir> <drill>...
set -euo pipefail
tessera=$1; data=$2; work=$3; shift 3
here=$(dirname "$0")
source "$here/drill_lib.sh"
common=$drill_common
train_cmd() {  # np out_dir overrides...
  local np=$1 out=$2; shift 2
  echo "$mpirun --allow-run-as-root --oversubscribe -n $np $tessera train --config $config --quiet $common train.out_dir=$out $*"
}
launch() {  # log out_dir launcher-options -- np overrides...
  local log=$1 out=$2; shift 2
  local opts=()
  while [ "$1" != "--" ]; do opts+=("$1"); shift; done
  shift
  local np=$1; shift
  # shellcheck disable=SC2046  # the command line is split into words on purpose
  "$tessera" launch --max-restarts 2 --grace 2 --run-dir "$out" "${opts[@]}" -- $(train_cmd "$np" "$out" "$@") \
    > "$log" 2>&1 || { cat "$log"; fail "tessera launch failed (log above)"; }
}
rm -rf "$work"; mkdir -p "$work"
# shellcheck disable=SC2046
$(train_cmd 4 "$work/reference") train.timeout_s=30 > "$work/reference.log" 2>&1 || { cat "$work/reference.log"; fail "reference run"; }
export_weights "$work/reference"

for drill in "$@"; do
  echo "== drill $drill"
  out=$work/$drill; log=$work/$drill.log
  case $drill in
  sigkill)
    rank=$((RANDOM % 4)); step=$((2 + RANDOM % 10))
    echo "SIGKILL rank $rank at step $step"
    TESSERA_FAULT=crash:rank=$rank:step=$step launch "$log" "$out" --heartbeat-timeout 60 -- 4 train.timeout_s=60
    expect "$log" "rank $rank" "died"
    # A crash before the first checkpoint (step 3) restarts from scratch: nothing to resume.
    resumed=$(sed -n 's/.*resuming from .* (step \([0-9]*\)).*/\1/p' "$log" | head -1)
    if [ -z "$resumed" ]; then
      [ "$step" -le 3 ] || fail "the restarted job did not resume from a checkpoint"
      resumed=0
    fi
    [ $((step - 1 - resumed)) -le 3 ] || fail "lost $((step - 1 - resumed)) steps, more than one checkpoint interval (3)"
    echo "crashed in step $step, resumed from step $resumed: lost $((step - 1 - resumed)) completed steps"
    same_weights "$out" ;;
  hang)
    start=$(date +%s)
    TESSERA_FAULT=hang:rank=1:step=4 launch "$log" "$out" --heartbeat-timeout 6 -- 4 train.timeout_s=120
    expect "$log" "rank 1" "no progress"
    echo "hang found and the job finished in $(( $(date +%s) - start )) s (heartbeat timeout 6 s, collective timeout 120 s)"
    same_weights "$out" ;;
  corrupt)
    TESSERA_FAULT=corrupt_shard:rank=2:step=6,crash:rank=0:step=8 launch "$log" "$out" --heartbeat-timeout 60 -- 4 train.timeout_s=60
    expect "$log" "checksum" "shard_2.bin" "falling back to the previous checkpoint" "resuming from .*step_00000003"
    [ -d "$out/checkpoints/step_00000006.corrupt" ] || fail "the corrupt checkpoint was not set aside"
    same_weights "$out" ;;
  savekill)
    TESSERA_FAULT=crash_in_save:rank=1:step=6 launch "$log" "$out" --heartbeat-timeout 60 -- 4 train.timeout_s=60 \
      train.async_checkpoint=true
    expect "$log" "removed unfinished checkpoint save" "resuming from .*step_00000003"
    same_weights "$out" ;;
  diskfull)
    # shellcheck disable=SC2046
    TESSERA_FAULT=disk_full:rank=2:step=6,corrupt_shard:rank=1:step=6 $(train_cmd 4 "$out") train.timeout_s=30 \
      train.async_checkpoint=true > "$log" 2>&1 || { cat "$log"; fail "a failed asynchronous save must not end training"; }
    expect "$log" "No space left on device" "asynchronous checkpoint of step 6 failed" \
      "rank 1\] error: asynchronous checkpoint of step 6 failed: rank 0 could not complete"
    [ ! -d "$out/checkpoints/step_00000006" ] || fail "a failed save left a checkpoint named step_00000006"
    for s in 3 9 12; do [ -f "$out/checkpoints/step_0000000$s/COMPLETE" ] || [ -f "$out/checkpoints/step_000000$s/COMPLETE" ] \
      || fail "checkpoint $s missing"; done
    same_weights "$out" ;;
  shrink)
    echo 4 > "$work/slots"
    (  # remove one slot once the job is under way
      while ! grep -qs '"step":[2-9]' "$out"/launch/heartbeats/rank_0.json 2>/dev/null; do sleep 0.2; done
      echo 3 > "$work/slots"
    ) &
    TESSERA_FAULT=crash:rank=3:step=10 launch "$log" "$out" --heartbeat-timeout 60 --slots-file "$work/slots" \
      --heartbeat-dir "$out/launch/heartbeats" -- 4 train.timeout_s=60
    wait
    expect "$log" "resuming from .*step_00000009"
    /usr/bin/python3 -c 'import json, sys
ranks = [json.loads(l)["ranks"] for l in open(sys.argv[1])]
print("ranks per attempt:", ranks)
sys.exit(0 if ranks[0] == 4 and ranks[-1] == 3 else 1)' "$out/launch/restarts.jsonl" || fail "the job did not go from 4 ranks to 3"
    # The uninterrupted 3-rank continuation from the same checkpoint.
    mkdir -p "$work/shrink_ref/checkpoints"
    cp -r "$out/checkpoints/step_00000009" "$work/shrink_ref/checkpoints/"
    # shellcheck disable=SC2046
    $(train_cmd 3 "$work/shrink_ref") train.timeout_s=30 --resume > "$work/shrink_ref.log" 2>&1 \
      || { cat "$work/shrink_ref.log"; fail "3-rank continuation"; }
    /usr/bin/python3 - "$out/metrics.jsonl" "$work/shrink_ref/metrics.jsonl" <<'PY' || fail "3-rank curves differ"
import json, sys
def losses(p):
    return {e["step"]: e["loss"] for e in map(json.loads, open(p)) if "loss" in e}
got, ref = losses(sys.argv[1]), losses(sys.argv[2])
worst = max(abs(got[s] - ref[s]) / abs(ref[s]) for s in range(10, 13))
print(f"steps 10-12 on 3 ranks after the shrink vs the uninterrupted 3-rank continuation: worst {worst:.2e}")
sys.exit(0 if worst <= 1e-5 else 1)
PY
    ;;
  *) fail "unknown drill $drill" ;;
  esac
  echo "PASS: $drill"
done
