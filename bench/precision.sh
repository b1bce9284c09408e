#!/usr/bin/env bash
# Mixed precision on this CPU, in one run: matmul GFLOP/s of the f32 sgemm against the bf16 matmul
# (native oneDNN AVX512-BF16/AMX kernel when present, and the emulated path) and fp16 (emulated) on
# linear-layer shapes; then bench-small trained fp32 vs bf16 (same seed, same batches) with the
# largest relative loss difference per step. Writes bench/results/precision.json.
# Usage: bench/precision.sh [build_dir] [steps]   (env: THREADS=2 BATCH=2 SEQ=256 FP16=1 for fp16 + loss scaling)
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
STEPS=${2:-200}
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$HERE/bench/results"
EXTRA=()
if [[ "${FP16:-0}" == 1 ]]; then EXTRA+=(--fp16); fi
OMP_NUM_THREADS=${THREADS:-2} "$BUILD/bench/bench_precision" --threads "${THREADS:-2}" --reps "${REPS:-7}" \
  --steps "$STEPS" --batch "${BATCH:-2}" --seq "${SEQ:-256}" "${EXTRA[@]}" --json "$HERE/bench/results/precision.json"
