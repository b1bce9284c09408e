#!/usr/bin/env bash
# Side-by-side training-step benchmark: Tessera vs PyTorch CPU on identical models, batch, threads
# and optimizer, in one run. Prints a table with ratios and writes bench/results/model_bench.json.
# Usage: bench/run_model_bench.sh [build_dir] [steps]   (quick run: CONFIGS="bench-tiny:8:256" ...)
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-5}
HERE=$(cd "$(dirname "$0")/.." && pwd)
OUT=$HERE/bench/results
mkdir -p "$OUT"
CONFIGS=${CONFIGS:-"gpt2:1:1024 bench-small:8:512 bench-tiny:8:256"}
THREADS=${THREADS:-"1 2"}
RESULTS=()
for cfg in $CONFIGS; do
  IFS=: read -r model B T <<<"$cfg"
  for th in $THREADS; do
    # Tessera: one process per point so peak RSS is per configuration; --bind-to none not needed (no MPI).
    "$BUILD/bench/bench_train_step" --model "$model" --batch "$B" --seq "$T" --threads "$th" --steps "$STEPS" \
      --json "$OUT/tessera_${model}_${th}.json" >&2
    # PyTorch at its best here: OpenMP OpenBLAS, OPENBLAS_CORETYPE unset for this process only.
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \
      OMP_NUM_THREADS="$th" /usr/bin/python3 "$HERE/tools/bench_pytorch.py" --model "$model" --batch "$B" --seq "$T" \
      --threads "$th" --steps "$STEPS" >"$OUT/pytorch_${model}_${th}.json"
    RESULTS+=("$OUT/tessera_${model}_${th}.json" "$OUT/pytorch_${model}_${th}.json")
  done
done
/usr/bin/python3 - "$OUT/model_bench.json" "${RESULTS[@]}" <<'PY'
import json, sys
out, files = sys.argv[1], sys.argv[2:]
rows = []
print(f"{'model':<12} {'thr':>3} {'tessera tok/s':>14} {'pytorch tok/s':>14} {'ratio':>6} {'GFLOP/s':>8} "
      f"{'MFU':>6} {'RSS MiB T/P':>14}")
for i in range(0, len(files), 2):
    t, p = (json.load(open(f)) for f in files[i:i + 2])
    ratio = t["tokens_per_s"] / p["tokens_per_s"]
    rows.append({"tessera": t, "pytorch": p, "ratio": ratio})
    print(f"{t['model']:<12} {t['threads']:>3} {t['tokens_per_s']:>14.0f} {p['tokens_per_s']:>14.0f} {ratio:>6.2f} "
          f"{t['gflops']:>8.1f} {100*t['mfu']:>5.1f}% {t['peak_rss_mb']:>6.0f}/{p['peak_rss_mb']:<6.0f}")
json.dump(rows, open(out, "w"), indent=1)
PY
