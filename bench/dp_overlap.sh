#!/usr/bin/env bash
# Data-parallel overlap benchmark: 2 ranks x 1 thread train bench-small (micro_batch 8, seq_len 512)
# with --trace; tools/trace_overlap.py measures the share of all-reduce time hidden behind backward
# (per step: union of "allreduce bucket" spans, and the part inside "backward"; first step excluded).
# Runs once per binding in BINDS (Open MPI --bind-to core / none) and reports each; writes
# bench/results/dp_overlap.json.
# Usage: bench/dp_overlap.sh [build_dir] [steps]   (env: SEQ=512 MB=8 MODEL=bench-small BINDS="core none")
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
STEPS=${2:-8}
SEQ=${SEQ:-512}; MB=${MB:-8}; MODEL=${MODEL:-bench-small}; BINDS=${BINDS:-"core none"}
HERE=$(cd "$(dirname "$0")/.." && pwd)
OUT=$HERE/bench/results
TESSERA=$BUILD/src/cli/tessera
mkdir -p "$OUT"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
"$TESSERA" prepare --kjv --tokenizer byte --out "$TMP/kjv" >/dev/null  # vocab 256 fits bench-small's 8192
PARTS=()
for bind in $BINDS; do
  echo "== 2 ranks x 1 thread, $MODEL, micro_batch $MB, seq_len $SEQ, $STEPS steps, --bind-to $bind" >&2
  mpirun --allow-run-as-root --oversubscribe --bind-to "$bind" -np 2 "$TESSERA" train \
    --config "$HERE/tests/configs/tiny.toml" model.preset="$MODEL" data.dir="$TMP/kjv" data.seq_len="$SEQ" \
    parallel.dp=2 train.threads=1 train.micro_batch="$MB" train.batch_tokens=$((MB * SEQ * 2)) \
    train.steps="$STEPS" train.eval_interval=0 train.log_interval=1000 train.timeout_s=600 \
    train.out_dir="$TMP/run_$bind" --trace "$TMP/trace_$bind.json" | tee "$TMP/log_$bind" | grep '^done:' >&2
  /usr/bin/python3 "$HERE/tools/trace_overlap.py" "$TMP/trace_$bind.json" --json "$TMP/overlap_$bind.json"
  cp "$TMP/trace_$bind.json" "$OUT/dp_overlap_trace_$bind.json"
  PARTS+=("$bind" "$TMP/overlap_$bind.json" "$TMP/log_$bind")
done
/usr/bin/python3 - "$OUT/dp_overlap.json" "$MODEL" "$MB" "$SEQ" "$STEPS" "${PARTS[@]}" <<'PY'
import json, re, sys
out, model, mb, seq, steps, parts = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6:]
rows = []
print(f"\n{'bind':<6} {'tok/s':>8} {'backward ms/step':>17} {'comm ms/step':>13} {'hidden ms/step':>15} "
      f"{'hidden/comm':>12} {'sync wait ms/step':>18}")
for i in range(0, len(parts), 3):
    bind, tot = parts[i], json.load(open(parts[i + 1]))["total"]
    done = [l for l in open(parts[i + 2]) if l.startswith("done:")]
    tok_s = float(re.search(r"([0-9.]+) tok/s", done[-1]).group(1)) if done else None
    n = tot["steps_used"] * 2  # rank-steps
    row = {"bind": bind, "tokens_per_s": tok_s, "model": model, "micro_batch": mb, "seq_len": seq, "steps": steps,
           "ranks": 2, "threads": 1, **tot}
    rows.append(row)
    print(f"{bind:<6} {tok_s or 0:>8.0f} {tot['backward_ms'] / n:>17.1f} {tot['comm_ms'] / n:>13.1f} "
          f"{tot['hidden_ms'] / n:>15.1f} {100 * tot['hidden_fraction']:>11.1f}% {tot['sync_wait_ms'] / n:>18.1f}")
json.dump(rows, open(out, "w"), indent=1)
print(f"(target: hidden/comm >= 80%; per-step values are means over ranks and steps 2..{steps}) -> {out}")
PY
