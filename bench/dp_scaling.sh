#!/usr/bin/env bash
# Data-parallel scaling benchmark: 2 ranks x 1 thread vs 1 rank x 1 thread on the same per-rank
# batch (bench-small, micro_batch 8, seq_len 512), interleaved REPS times; tokens/s from the
# trainer's final "done: N steps, X tok/s" line (first step excluded by the trainer). Writes
# bench/results/dp_scaling.json. Target: ratio >= 1.85.
# Usage: bench/dp_scaling.sh [build_dir] [steps]   (env: SEQ=512 MB=8 MODEL=bench-small BIND=core REPS=2)
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
STEPS=${2:-6}
SEQ=${SEQ:-512}; MB=${MB:-8}; MODEL=${MODEL:-bench-small}; BIND=${BIND:-core}; REPS=${REPS:-2}
source "$(dirname "$0")/lib.sh"
run() {  # run <np> <label>: prints tok/s
  local np=$1 label=$2
  mpirun --allow-run-as-root --oversubscribe --bind-to "$BIND" -np "$np" "$TESSERA" train \
    --config "$HERE/tests/configs/tiny.toml" model.preset="$MODEL" data.dir="$TMP/kjv" data.seq_len="$SEQ" \
    parallel.dp="$np" train.threads=1 train.micro_batch="$MB" train.batch_tokens=$((MB * SEQ * np)) \
    train.steps="$STEPS" train.eval_interval=0 train.log_interval=1000 train.timeout_s=600 \
    train.out_dir="$TMP/$label" > "$TMP/$label.log"
  done_tok_s "$TMP/$label.log"
}
RESULTS=()
for rep in $(seq 1 "$REPS"); do
  one=$(run 1 "r${rep}_np1"); two=$(run 2 "r${rep}_np2")
  echo "rep $rep: 1 rank $one tok/s, 2 ranks $two tok/s" >&2
  RESULTS+=("$one" "$two")
done
/usr/bin/python3 - "$OUT/dp_scaling.json" "$MODEL" "$MB" "$SEQ" "$STEPS" "$BIND" "${RESULTS[@]}" <<'PY'
import json, sys
out, model, mb, seq, steps, bind = sys.argv[1:7]
vals = [float(v) for v in sys.argv[7:]]
pairs = [(vals[i], vals[i + 1]) for i in range(0, len(vals), 2)]
print(f"\n{'rep':>3} {'1 rank tok/s':>13} {'2 ranks tok/s':>14} {'ratio':>6}")
for i, (a, b) in enumerate(pairs, 1):
    print(f"{i:>3} {a:>13.0f} {b:>14.0f} {b / a:>6.2f}")
best1, best2 = max(a for a, _ in pairs), max(b for _, b in pairs)
print(f"best {best1:>9.0f} {best2:>14.0f} {best2 / best1:>6.2f}   (target >= 1.85; {model}, micro_batch {mb}, "
      f"seq_len {seq}, {steps} steps, --bind-to {bind})")
json.dump({"model": model, "micro_batch": int(mb), "seq_len": int(seq), "steps": int(steps), "bind": bind,
           "pairs": [{"one_rank_tok_s": a, "two_ranks_tok_s": b, "ratio": b / a} for a, b in pairs],
           "best_ratio": best2 / best1}, open(out, "w"), indent=1)
PY
