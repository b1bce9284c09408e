#!/bin/bash
# One rank of a fake training job for the launcher's tests: writes the trainer's heartbeat files
# (TESSERA_HEARTBEAT_DIR/rank_<r>.json), meets the other ranks at a spinning barrier before every
# step (as ranks meet in a collective), "checkpoints" its step to <out>/ckpt every 2 steps, resumes
# from it when TESSERA_RESUME=auto, and obeys TESSERA_FAULT like the trainer: crash|hang|fail|preempt:rank=R:step=S
# [:attempt=K] (attempt 0 unless given); SIGUSR1 makes it stop after its current step with a
# checkpoint, beat "preempted" and exit 75, like the trainer. crash also writes $FAKE_SLOTS_ON_CRASH to $FAKE_SLOTS_FILE
# first (a node going away). Usage: fake_rank.sh <out_dir> <steps>
out=$1
steps=$2
rank=${FAKE_RANK:-${OMPI_COMM_WORLD_RANK:-${SLURM_PROCID:-0}}}
world=${FAKE_WORLD:-${OMPI_COMM_WORLD_SIZE:-${SLURM_NTASKS:-1}}}
attempt=${TESSERA_LAUNCH_ATTEMPT:-0}
job=${FAKE_JOB:-$attempt}  # one job of fake_mpirun.sh
hb=${TESSERA_HEARTBEAT_DIR:?the launcher sets TESSERA_HEARTBEAT_DIR}
mkdir -p "$out"

beat() {  # phase step [message]
  local f=$hb/rank_$rank.json
  printf '{"rank": %d, "world_size": %d, "host": "%s", "pid": %d, "attempt": %d, "step": %d, "phase": "%s", "time": %s, "out_dir": "%s", "message": "%s"}\n' \
    "$rank" "$world" "$HOSTNAME" $$ "$attempt" "$2" "$1" "$EPOCHREALTIME" "$out" "${3:-}" > "$f.tmp.$$"
  mv "$f.tmp.$$" "$f"
}

fault_at() {  # kind step -> true when TESSERA_FAULT asks for it on this rank, step and attempt
  local spec kind r s a
  IFS=, read -ra specs <<< "${TESSERA_FAULT:-}"
  for spec in "${specs[@]}"; do
    kind=${spec%%:*} r=-1 s=-1 a=0
    [[ $spec =~ :rank=([0-9]+) ]] && r=${BASH_REMATCH[1]}
    [[ $spec =~ :step=([0-9]+) ]] && s=${BASH_REMATCH[1]}
    [[ $spec =~ :attempt=([0-9]+) ]] && a=${BASH_REMATCH[1]}
    [[ $kind == "$1" && $r == "$rank" && $s == "$2" && $a == "$attempt" ]] && return 0
  done
  return 1
}

barrier() {  # spin (builtins only, like MPI's busy polling) until every rank reached step $1
  local f=$out/barrier_${attempt}_$rank
  echo "$1" > "$f.tmp" && mv "$f.tmp" "$f"
  local r v
  for ((r = 0; r < world; r++)); do
    while :; do
      [[ -f $out/stop_$job ]] && return 1  # a peer stopped (preempted): stop too
      v=-1
      [[ -f $out/barrier_${attempt}_$r ]] && read -r v < "$out/barrier_${attempt}_$r"
      [[ ${v:--1} -ge $1 ]] && break
    done
  done
}

stop=0
trap 'stop=1' USR1
stop_now() {  # last completed step: checkpoint it, say "preempted", exit 75
  touch "$out/stop_$job"
  [[ $rank == 0 ]] && echo "$1" > "$out/ckpt.tmp" && mv "$out/ckpt.tmp" "$out/ckpt"
  beat preempted "$1" "$out/ckpt"
  exit 75
}
start=0
[[ $TESSERA_RESUME == auto && -f $out/ckpt ]] && read -r start < "$out/ckpt"
beat setup 0
beat train "$start"  # like the trainer: set-up done, resumed at $start
for ((step = start + 1; step <= steps; step++)); do
  if fault_at crash "$step"; then
    [[ -n $FAKE_SLOTS_FILE ]] && echo "$FAKE_SLOTS_ON_CRASH" > "$FAKE_SLOTS_FILE"
    kill -9 $$
  fi
  fault_at hang "$step" && sleep 1000
  fault_at preempt "$step" && stop=1  # as if signalled directly (Slurm to the ranks)
  if fault_at fail "$step"; then
    beat failed $((step - 1)) "injected failure"
    exit 3
  fi
  barrier "$step" || stop_now $((step - 1))
  sleep 0.05
  if [[ $rank == 0 && $((step % 2)) == 0 ]]; then
    beat checkpoint "$step"
    echo "$step" > "$out/ckpt.tmp" && mv "$out/ckpt.tmp" "$out/ckpt"
  fi
  beat train "$step"
  [[ $stop == 1 ]] && stop_now "$step"
done
beat done "$steps"
