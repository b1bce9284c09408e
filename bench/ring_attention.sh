#!/usr/bin/env bash
# Ring attention against Ulysses on this machine: bench_ring_attention (bench-small widths, 2 layers,
# B 1) at cp = 2 for seq_len 2048 and 4096, each mode in its own mpirun; prints each run's line and
# writes bench/results/ring_attention.json (the runs' JSON in a list).
# Usage: bench/ring_attention.sh [build_dir] [steps=3]
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
STEPS=${2:-3}
HERE=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$(cd "$BUILD" && pwd)/bench/bench_ring_attention
OUT=$HERE/bench/results
mkdir -p "$OUT"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
for seq in 2048 4096; do
  for mode in ring ulysses; do
    mpirun --allow-run-as-root --oversubscribe -np 2 "$BENCH" --seq "$seq" --layers 2 --steps "$STEPS" --mode "$mode" \
      --json "$TMP/${mode}_$seq.json" | tail -n +2
  done
done
/usr/bin/python3 - "$TMP" "$OUT/ring_attention.json" <<'PY'
import glob, json, sys, datetime
runs = [json.load(open(p)) for p in sorted(glob.glob(sys.argv[1] + "/*.json"))]
json.dump({"date": datetime.datetime.now().isoformat(timespec="seconds"), "runs": runs}, open(sys.argv[2], "w"), indent=1)
print("wrote", sys.argv[2])
PY
