#!/bin/bash
# A stand-in for mpirun in the launcher's tests (the test links it as "mpirun"): runs `-n N` copies
# of the program on this host with FAKE_RANK/FAKE_WORLD set and, like mpirun, ends the job when a
# rank fails and prints Open MPI's "mpirun noticed that process rank ..." line for a killed rank;
# forwards SIGUSR1 to the ranks (as mpirun does) and exits 75 when ranks stop preempted.
# Appends its own command line to $FAKE_ARGS_LOG when set, so tests can check the rewrites.
[[ -n $FAKE_ARGS_LOG ]] && echo "mpirun $*" >> "$FAKE_ARGS_LOG"
n=1
while [[ $# -gt 0 ]]; do
  case $1 in
    -n|-np) n=$2; shift 2 ;;
    -x) shift 2 ;;
    --oversubscribe) shift ;;
    *) break ;;
  esac
done
declare -A rank_of
pids=()
for ((r = 0; r < n; r++)); do
  FAKE_RANK=$r FAKE_WORLD=$n FAKE_JOB=$$ "$@" &
  pids+=($!)
  rank_of[$!]=$r
done
trap 'kill -USR1 "${pids[@]}" 2>/dev/null' USR1
preempted=0
for ((i = 0; i < n; i++)); do
  while :; do
    finished=
    wait -n -p finished
    st=$?
    [[ -n $finished ]] && break  # else the wait was cut short by SIGUSR1
  done
  if [[ $st -eq 75 ]]; then
    preempted=1
  elif [[ $st -ne 0 ]]; then
    if [[ $st -gt 128 ]]; then
      echo "mpirun noticed that process rank ${rank_of[$finished]} with PID $finished on node $(hostname) exited on signal $((st - 128)) (Killed)." >&2
    fi
    kill -9 "${pids[@]}" 2>/dev/null
    exit "$st"
  fi
done
[[ $preempted -eq 1 ]] && exit 75
exit 0
