#!/usr/bin/env bash
# `tessera plan --search` checked by running what it ranks: this machine is calibrated once (mpirun -np 2
# --calibrate), the search ranks the layouts of a small model on RANKS ranks, and the top 5 plus 3
# others (spread over the rest of the ranking) train a few steps each. Prints each one's predicted
# and measured tokens/s and whether the search's first choice measures within 10 % of the best
# measured (the issue's acceptance); writes bench/results/search_vs_measured.json. Run it on a quiet
# machine; all RANKS ranks run here (--ranks-per-node), sharing its cores where they outnumber them.
# The model: tiny widened to 4 layers of width 128 (0.9M parameters; byte-level KJV), 2048-token batches.
# Usage: bench/search_vs_measured.sh [build_dir] [steps]  (env: RANKS=4; HARDWARE=file to skip calibrating;
#   MODEL="model.preset=bench-small data.seq_len=128 train.batch_tokens=2048": another model and batch,
#   calibrated for that model (`plan --calibrate --config`); RESULT=name: bench/results/<name>.json)
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
STEPS=${2:-10}
RANKS=${RANKS:-4}
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
CONFIG=$HERE/tests/configs/tiny.toml
MPI=(mpirun --allow-run-as-root --oversubscribe)
echo "load before: $(uptime)"
HW=${HARDWARE:-$TMP/hardware.toml}
MODEL=${MODEL:-model.n_layer=4 model.d_model=128 model.d_ff=512 data.seq_len=64 train.batch_tokens=2048}
RESULT=${RESULT:-search_vs_measured}
# shellcheck disable=SC2086  # $MODEL is a list of overrides
[[ -n ${HARDWARE:-} ]] || "${MPI[@]}" -np 2 "$TESSERA" plan --calibrate --config "$CONFIG" $MODEL --name this-machine --out "$HW"
# shellcheck disable=SC2086
"$TESSERA" plan --config "$CONFIG" $MODEL --search --ranks "$RANKS" --ranks-per-node "$RANKS" --hardware "$HW" --json --top 0 > "$TMP/search.json"
/usr/bin/python3 - "$TMP/search.json" > "$TMP/picked.txt" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["candidates"]
n = len(c)
picked = list(range(min(5, n))) + [i for i in (n // 4, n // 2, n - 1) if i >= 5]
for i in dict.fromkeys(picked):
    print(f"{i}|{c[i]['overrides']}|{c[i]['tokens_per_s']}")
PY
: > "$TMP/runs.txt"
while IFS='|' read -r idx over pred; do
  run=$TMP/c$idx
  # shellcheck disable=SC2086
  if timeout 300 "${MPI[@]}" -np "$RANKS" "$TESSERA" train --config "$CONFIG" $MODEL $over train.threads=1 \
      train.eval_interval=0 train.steps="$STEPS" data.dir="$TMP/kjv" train.out_dir="$run" train.hardware="$HW" \
      --json > "$run.json" 2> "$run.log" < /dev/null; then  # mpirun would read the list of candidates
    echo "$idx|$over|$pred|$(cat "$run.json")" >> "$TMP/runs.txt"
  else
    echo "candidate $idx failed: $(tail -2 "$run.log")" >&2
  fi
done < "$TMP/picked.txt"
echo "load after: $(uptime)"
/usr/bin/python3 - "$TMP/runs.txt" "$OUT/$RESULT.json" "$(uptime)" <<'PY'
import json, sys
rows = []
for line in open(sys.argv[1]):
    idx, over, pred, summary = line.rstrip("\n").split("|", 3)
    rows.append({"search_rank": int(idx) + 1, "overrides": over, "predicted_tokens_per_s": float(pred),
                 "measured_tokens_per_s": json.loads(summary)["tokens_per_s"]})
best = max(r["measured_tokens_per_s"] for r in rows)
print(f"{'search #':>8} {'predicted tok/s':>15} {'measured tok/s':>14} {'vs best':>8}  layout")
for r in rows:
    print(f"{r['search_rank']:>8} {r['predicted_tokens_per_s']:>15.0f} {r['measured_tokens_per_s']:>14.0f} "
          f"{100 * (r['measured_tokens_per_s'] / best - 1):>7.1f}%  {r['overrides']}")
first = next(r for r in rows if r["search_rank"] == 1)
gap = first["measured_tokens_per_s"] / best - 1
print(f"the search's first choice measures {100 * gap:.1f}% against the best measured: "
      f"{'within' if gap >= -0.10 else 'NOT within'} 10 %")
json.dump({"load_after": sys.argv[3], "rows": rows, "first_vs_best": gap}, open(sys.argv[2], "w"), indent=1)
print(f"wrote {sys.argv[2]}")
PY
