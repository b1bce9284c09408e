#!/bin/bash
# Preemption drills through the real trainer (tiny model, 12 steps of 768 tokens, train.threads=1,
# a checkpoint every 3 steps; TESSERA_FAULT=slow stretches the steps so a signal lands mid-run):
#   single    1 process: a real SIGTERM once a random step is logged -> exit 75, the rank-0 message,
#             a "preempted" event, a complete (verified) checkpoint of the step it stopped at;
#             --resume runs to the end bitwise equal to an uninterrupted run (exported weights)
#   one_rank  4 ranks under mpirun: SIGTERM to ONE random rank's process at a random step -> every
#             rank stops after the same step (all heartbeats "preempted" at that step), mpirun exits
#             75, the checkpoint of that step is complete, --resume ends bitwise equal
#   launcher  4 ranks under `tessera launch`, asynchronous saves: SIGTERM to the launcher -> the job
#             stops with a checkpoint (a periodic save in flight finished first), the launcher exits 75 and logs the attempt "preempted" (no restart); the
#             same command again resumes from that checkpoint and ends bitwise equal
#   ps_sync   3 ranks, parallel.mode = "ps" (2 workers, 1 server): SIGTERM to ONE random rank, the
#             server included -> the signal travels in the pushes and the answers, every rank stops
#             after the same step with its checkpoint pieces, mpirun exits 75, --resume ends bitwise equal
#   ps_async  4 ranks, ps.consistency = "async" with 2 workers and 2 servers: SIGTERM to ONE random
#             rank -> the servers relay it, every rank stops after the same step with its checkpoint,
#             mpirun exits 75; --resume runs to the end (async updates depend on arrival order, so
#             not bitwise: the check is the resumed step and a finished run)
#   ps_ssp    3 ranks, ps.consistency = "ssp" (staleness 1), 1 server: as ps_async
#   sigint2   1 process: a second SIGINT ends it at once (exit 130, no preempted checkpoint)
#   preemption_drills.sh <tessera> <data_dir> <work_dir> <drill>...
set -euo pipefail
tessera=$1; data=$2; work=$3; shift 3
here=$(dirname "$0")
source "$here/drill_lib.sh"
mpi="$mpirun --allow-run-as-root --oversubscribe"
common="$drill_common train.log_interval=1 train.timeout_s=120"
# Each step stretched to ~25x its compute on rank 0 (a few tenths of a second): the signal lands mid-run.
slow=slow:rank=0:step=1:factor=25
EXTRA=  # overrides of one drill's runs (its reference and resume too)
train_args() { local out=$1; shift; echo "train --config $config --quiet $common $EXTRA train.out_dir=$out $*"; }  # out_dir overrides...
logged_step() {  # metrics.jsonl -> the last step with a logged loss (0: none yet)
  /usr/bin/python3 - "$1" <<'PY' 2>/dev/null || echo 0
import json, sys
steps = [0]
for line in open(sys.argv[1]):
    try:
        e = json.loads(line)
    except ValueError:
        break  # a line being written
    if "loss" in e: steps.append(e["step"])
print(steps[-1])
PY
}
wait_for_step() {  # out_dir step pid: poll until the step is logged (generous: a loaded 2-core machine)
  local deadline=$((SECONDS + 240))
  while [ "$(logged_step "$1/metrics.jsonl")" -lt "$2" ]; do
    kill -0 "$3" 2>/dev/null || fail "the job ended before step $2 was logged"
    [ $SECONDS -lt $deadline ] || fail "step $2 was not logged within 240 s"
    sleep 0.05
  done
}
wait_rc() {  # pid seconds: sets rc to the exit code (fails after the deadline); not in a subshell,
  local deadline=$((SECONDS + $2))  # which could not wait for this shell's child
  while kill -0 "$1" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || { kill -KILL "$1"; fail "pid $1 still running after $2 s"; }
    sleep 0.1
  done
  rc=0
  wait "$1" || rc=$?
}
sigterm_after_step() {  # out_dir step job_pid target_pid seconds: once the step is logged, SIGTERM the
  wait_for_step "$1" "$2" "$3"  # target (the job itself, one of its ranks, the launcher); sets rc
  kill -TERM "$4"
  wait_rc "$3" "$5"
}
preempted_step() {  # out_dir -> the step of the "preempted" event in metrics.jsonl
  /usr/bin/python3 -c 'import json, sys
ev = [e for e in map(json.loads, open(sys.argv[1])) if e.get("event") == "preempted"]
assert len(ev) == 1, ev
print(ev[0]["step"])' "$1/metrics.jsonl" || fail "no single preempted event in $1/metrics.jsonl"
}
check_checkpoint() {  # out_dir step: a complete checkpoint of that step that verifies piece by piece
  local dir; dir=$(printf '%s/checkpoints/step_%08d' "$1" "$2")
  [ -f "$dir/COMPLETE" ] || fail "no complete checkpoint $dir"
  "$tessera" checkpoint inspect "$dir" > "$1.inspect.log" 2>&1 || { cat "$1.inspect.log"; fail "$dir does not verify"; }
  echo "$dir"
}
reference() {  # name np: the uninterrupted run, exported once
  [ -f "$work/$1.safetensors" ] && return
  if [ "$2" = 1 ]; then
    # shellcheck disable=SC2046
    "$tessera" $(train_args "$work/$1") > "$work/$1.log" 2>&1 || { cat "$work/$1.log"; fail "reference run $1"; }
  else
    # shellcheck disable=SC2046
    $mpi -n "$2" "$tessera" $(train_args "$work/$1") > "$work/$1.log" 2>&1 || { cat "$work/$1.log"; fail "reference $1"; }
  fi
  export_weights "$work/$1"
}
resume_to_end() {  # out_dir np step reference
  local log=$1.resume.log
  if [ "$2" = 1 ]; then
    # shellcheck disable=SC2046
    "$tessera" $(train_args "$1") --resume > "$log" 2>&1 || { cat "$log"; fail "--resume of $1"; }
  else
    # shellcheck disable=SC2046
    $mpi -n "$2" "$tessera" $(train_args "$1") --resume > "$log" 2>&1 || { cat "$log"; fail "--resume of $1"; }
  fi
  expect "$log" "$(printf 'resuming from .*step_%08d (step %d)' "$3" "$3")"
  if [ -n "$4" ]; then same_weights "$1" "$4"; else expect "$log" "^done: 12 steps"; fi
}
signal_one_rank() {  # np [reference]: SIGTERM to ONE random rank of np at a random step; every rank stops
  local np=$1 ref=${2:-} rank at pid target step dir  # after the same step, and --resume ends bitwise equal
  rank=$((RANDOM % np)); at=$((2 + RANDOM % 7))
  # shellcheck disable=SC2046
  TESSERA_HEARTBEAT_DIR=$out/hb TESSERA_FAULT=$slow $mpi -n "$np" "$tessera" $(train_args "$out") > "$log" 2>&1 &
  pid=$!
  wait_for_step "$out" 1 "$pid"  # rank_N.json exists
  target=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["pid"])' "$out/hb/rank_$rank.json")
  sigterm_after_step "$out" "$at" "$pid" "$target" 180
  [ "$rc" = 75 ] || { cat "$log"; fail "mpirun exited $rc after SIGTERM to rank $rank, not 75"; }
  step=$(preempted_step "$out")
  # Every rank's last heartbeat: "preempted" at the same step, with the checkpoint written.
  /usr/bin/python3 - "$out/hb" "$step" "$np" <<'PY' || fail "the ranks did not all stop after step $step"
import json, sys
beats = [json.load(open(f"{sys.argv[1]}/rank_{r}.json")) for r in range(int(sys.argv[3]))]
print("last heartbeats:", [(b["rank"], b["phase"], b["step"]) for b in beats])
assert all(b["phase"] == "preempted" and b["step"] == int(sys.argv[2]) for b in beats)
PY
  [ "$step" -ge "$at" ] && [ "$step" -lt 12 ] || fail "stopped after step $step; the signal came after step $at"
  dir=$(check_checkpoint "$out" "$step")
  expect "$log" "stopping after step $step on SIGTERM: checkpoint $dir written"
  echo "SIGTERM to rank $rank (pid $target) once step $at was logged: all $np ranks stopped after step $step"
  resume_to_end "$out" "$np" "$step" "$ref"
}
rm -rf "$work"; mkdir -p "$work"

for drill in "$@"; do
  echo "== drill $drill"
  out=$work/$drill; log=$work/$drill.log
  case $drill in
  single)
    reference ref1 1
    at=$((2 + RANDOM % 7))
    # shellcheck disable=SC2046
    TESSERA_FAULT=$slow "$tessera" $(train_args "$out") > "$log" 2>&1 &
    pid=$!
    sigterm_after_step "$out" "$at" "$pid" "$pid" 120
    [ "$rc" = 75 ] || { cat "$log"; fail "exit code $rc after SIGTERM, not 75"; }
    step=$(preempted_step "$out")
    [ "$step" -ge "$at" ] && [ "$step" -lt 12 ] || fail "stopped after step $step; the signal came after step $at"
    dir=$(check_checkpoint "$out" "$step")
    expect "$log" "stopping after step $step on SIGTERM: checkpoint $dir written; resume with --resume (exit code 75)" \
      "^stopped early (preempted): $step steps"
    echo "SIGTERM once step $at was logged: stopped after step $step with $dir"
    resume_to_end "$out" 1 "$step" ref1 ;;
  one_rank)
    reference ref4 4
    signal_one_rank 4 ref4 ;;
  ps_sync)
    EXTRA="parallel.mode=ps"  # 2 workers and the server (the last rank), which may be the one signalled
    reference ref_ps 3
    signal_one_rank 3 ref_ps
    EXTRA= ;;
  ps_async)  # the workers are at different steps: no reference (arrival order decides the updates)
    EXTRA="parallel.mode=ps ps.consistency=async ps.servers=2"
    signal_one_rank 4
    EXTRA= ;;
  ps_ssp)
    EXTRA="parallel.mode=ps ps.consistency=ssp ps.staleness=1"
    signal_one_rank 3
    EXTRA= ;;
  launcher)
    reference ref4 4
    at=$((2 + RANDOM % 7))
    launch_args() {
      echo "launch --max-restarts 1 --grace 2 --stop-timeout 120 --heartbeat-timeout 120 --run-dir $out --"
      echo "$mpi -n 4 $tessera $(train_args "$out" train.async_checkpoint=true)"
    }
    # shellcheck disable=SC2046  # env execs tessera: $! is the launcher itself
    env TESSERA_FAULT=$slow "$tessera" $(launch_args) > "$log" 2>&1 &
    pid=$!
    sigterm_after_step "$out" "$at" "$pid" "$pid" 180
    [ "$rc" = 75 ] || { cat "$log"; fail "tessera launch exited $rc after SIGTERM, not 75"; }
    step=$(preempted_step "$out")
    dir=$(check_checkpoint "$out" "$step")
    expect "$log" "received signal 15, SIGTERM: asking every rank to stop" \
      "preempted at step $step; checkpoint $dir saved; run the same command again to resume"
    ! grep -q "restarting" "$log" || { cat "$log"; fail "a preempted job must not be restarted"; }
    echo "SIGTERM to the launcher once step $at was logged: preempted after step $step"
    rc=0
    # shellcheck disable=SC2046
    env TESSERA_FAULT=$slow "$tessera" $(launch_args) > "$log.2" 2>&1 || rc=$?
    [ "$rc" = 0 ] || { cat "$log.2"; fail "the second launch exited $rc"; }
    expect "$log.2" "$(printf 'resuming from .*step_%08d (step %d)' "$step" "$step")" "done: the job finished on attempt 0"
    /usr/bin/python3 - "$out/launch/restarts.jsonl" "$dir" <<'PY' || fail "restarts.jsonl does not record the preemption"
import json, sys
a, b = [json.loads(l) for l in open(sys.argv[1])]
print("attempts:", [(r["outcome"], r["exit_code"], r["checkpoint"]) for r in (a, b)])
assert a["outcome"] == "preempted" and a["exit_code"] == 75 and not a["will_restart"] and a["failure"] is None, a
assert a["checkpoint"] == sys.argv[2], a
assert b["outcome"] == "done", b
PY
    same_weights "$out" ref4 ;;
  sigint2)
    # Step 3 takes seconds (slow x400), so both signals land inside it.
    # shellcheck disable=SC2046
    TESSERA_FAULT=slow:rank=0:step=3:factor=400 "$tessera" $(train_args "$out") train.checkpoint_interval=0 \
      > "$log" 2>&1 &
    pid=$!
    wait_for_step "$out" 2 "$pid"
    sleep 0.5
    kill -INT "$pid"
    sleep 0.3  # two signals pending at once would merge into one
    start=$SECONDS
    kill -INT "$pid"
    wait_rc "$pid" 30
    [ "$rc" = 130 ] || { cat "$log"; fail "exit code $rc after a second SIGINT, not 130"; }
    [ $((SECONDS - start)) -le 5 ] || fail "a second SIGINT took $((SECONDS - start)) s to end the run"
    expect "$log" "second SIGINT: exiting now without saving a checkpoint"
    [ -z "$(ls "$out/checkpoints" 2>/dev/null | grep -v tmp)" ] || fail "a checkpoint was saved: $(ls "$out/checkpoints")"
    ! grep -q '"preempted"' "$out/metrics.jsonl" || fail "an aborted run logged a preempted event" ;;
  *) fail "unknown drill $drill" ;;
  esac
  echo "PASS: $drill"
done
