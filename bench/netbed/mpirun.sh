#!/usr/bin/env bash
# Runs a program under mpirun across the slow-network bed: brings it up (up.sh), one rank per
# namespace, MPI over TCP only (btl tcp,self: no shared memory between ranks), tears it down on any
# exit (down.sh by trap). Any MPI program or benchmark runs unchanged inside it.
# Usage: bench/netbed/mpirun.sh [--ranks N] [--rate R] [--timeout S] [--mpi-arg A]... -- PROGRAM ARGS...
#   --ranks 4 (default), --rate 100mbit (default; 'none' = no tc limit), --timeout 1800 s for mpirun,
#   --mpi-arg passes one extra argument to mpirun (repeatable), e.g. --mpi-arg -x --mpi-arg FOO=1.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
RANKS=4 RATE=100mbit TIMEOUT=1800 MPI_EXTRA=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --ranks) RANKS=${2:?--ranks needs a number}; shift 2 ;;
    --rate) RATE=${2:?--rate needs a rate such as 100mbit or none}; shift 2 ;;
    --timeout) TIMEOUT=${2:?--timeout needs seconds}; shift 2 ;;
    --mpi-arg) MPI_EXTRA+=("${2:?--mpi-arg needs a value}"); shift 2 ;;
    --) shift; break ;;
    *) netbed_die "unknown option '$1'; usage: $0 [--ranks N] [--rate R] [--timeout S] [--mpi-arg A]... -- PROGRAM ARGS..." ;;
  esac
done
(( $# >= 1 )) || netbed_die "no program given; usage: $0 [--ranks N] [--rate R] -- PROGRAM ARGS..."
netbed_require
[[ $RANKS =~ ^[0-9]+$ ]] && (( RANKS >= 1 && RANKS <= 64 )) || netbed_die "--ranks '$RANKS': give 1..64"
netbed_is_unlimited "$RATE" || netbed_rate_bytes "$RATE" >/dev/null
[[ $TIMEOUT =~ ^[0-9]+$ ]] || netbed_die "--timeout '$TIMEOUT': give whole seconds"
command -v mpirun >/dev/null || netbed_die "mpirun not found; install openmpi-bin"
mpirun --version 2>/dev/null | grep -q "Open MPI" || netbed_die "the bed needs Open MPI's mpirun (rsh launcher); found: $(mpirun --version 2>&1 | head -1)"
PROG=$(command -v "$1") || netbed_die "program '$1' not found"
shift

# One bed at a time: a second run waits at most 10 min for the first, then fails clearly.
mkdir -p "$(dirname "$NETBED_LOCK")"
exec 9>"$NETBED_LOCK"
flock -w 600 9 || netbed_die "another bed run holds $NETBED_LOCK for over 10 min; wait for it or remove a stale bed with down.sh"

WORK=$(mktemp -d /tmp/tessera-netbed.XXXXXX)
# What each rank's link carried (Ethernet frames, MPI and its TCP/IP headers): the host end of rank
# i's veth receives what rank i sends. Printed before the bed goes down.
link_bytes() {
  local i d
  for ((i = 0; i < RANKS; i++)); do
    d=/sys/class/net/$NETBED_NS_PREFIX${i}h/statistics
    [[ -r $d/rx_bytes ]] || continue
    echo "netbed: rank $i link: sent $(<"$d/rx_bytes") bytes, received $(<"$d/tx_bytes") bytes" >&2
  done
}
MPI_PID=
cleanup() {
  if [[ -n $MPI_PID ]] && kill -0 "$MPI_PID" 2>/dev/null; then  # interrupted: stop mpirun, then the bed
    kill -TERM "$MPI_PID" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$MPI_PID" 2>/dev/null || break; sleep 0.5; done
  fi
  link_bytes; "$HERE/down.sh"; rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$HERE/down.sh"  # a bed left by a killed run (we hold the lock, so it is stale)
"$HERE/up.sh" "$RANKS" "$RATE"
for ((i = 1; i <= RANKS; i++)); do echo "$NETBED_NET.$i slots=1"; done > "$WORK/hostfile"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# pml ob1 + btl tcp,self: every byte between ranks crosses a (shaped) veth; ucx/ofi/vader/sm could
# otherwise take shared memory. bind-to none: each namespace looks like a whole machine to Open MPI.
# In the background and waited for, so a signal reaches the trap at once (bash defers traps while a
# foreground child runs); stdin from /dev/null as a background job may not read the terminal.
timeout -k 10 "$TIMEOUT" mpirun --allow-run-as-root --oversubscribe -np "$RANKS" \
  --hostfile "$WORK/hostfile" --map-by node --bind-to none \
  --mca plm_rsh_agent "$HERE/rsh_agent.sh" --mca plm_rsh_no_tree_spawn 1 \
  --mca pml ob1 --mca btl tcp,self --mca mtl ^ofi,psm,psm2 --mca osc ^ucx,sm --mca coll ^sm \
  --mca btl_tcp_if_include "$NETBED_CIDR" --mca oob_tcp_if_include "$NETBED_CIDR" \
  "${MPI_EXTRA[@]}" "$PROG" "$@" </dev/null &
MPI_PID=$!
wait "$MPI_PID" && rc=0 || rc=$?
MPI_PID=
(( rc == 124 )) && echo "netbed: error: mpirun ran past --timeout $TIMEOUT s and was killed" >&2
exit "$rc"
