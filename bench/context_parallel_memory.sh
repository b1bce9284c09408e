#!/usr/bin/env bash
# Activation memory per rank against parallel.cp (Ulysses and ring context parallelism): trains a few
# steps of tiny widened to 4 layers of width 128 with data.seq_len = SEQ at cp = 1, 2, 4 in each mode
# (cp ranks share one micro-batch of sequences) and prints each run's measured activation peak (the
# allocator's counters, metrics.jsonl "mem", worst rank), its ratio to cp = 1 against the ideal 1/cp,
# and the memory planner's prediction. Writes bench/results/context_parallel_memory.json.
# Usage: bench/context_parallel_memory.sh [build_dir] [seq_len]
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
SEQ=${2:-512}
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
CONFIG=$HERE/tests/configs/tiny.toml
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
BASE="model.n_layer=4 model.d_model=128 model.n_head=4 model.d_ff=512 model.max_seq_len=$SEQ data.seq_len=$SEQ
      train.micro_batch=2 train.batch_tokens=$((2 * SEQ)) train.threads=1 train.eval_interval=0 train.log_interval=1
      train.steps=2 data.dir=$TMP/kjv"
RUNS="1:ulysses 2:ulysses 4:ulysses 2:ring 4:ring"
for run in $RUNS; do
  cp=${run%%:*} mode=${run##*:} name=${run/:/_}
  # shellcheck disable=SC2086  # $BASE is a list of overrides
  "$TESSERA" plan --config "$CONFIG" $BASE parallel.cp=$cp parallel.cp_mode=$mode --ranks $cp --json > "$TMP/$name.plan.json"
  # shellcheck disable=SC2086
  mpirun --allow-run-as-root --oversubscribe -np "$cp" "$TESSERA" train --config "$CONFIG" $BASE parallel.cp=$cp \
    parallel.cp_mode=$mode train.out_dir="$TMP/$name" --quiet > "$TMP/$name.log" 2>&1 || { tail -5 "$TMP/$name.log"; exit 1; }
done
/usr/bin/python3 - "$TMP" "$OUT/context_parallel_memory.json" "$SEQ" $RUNS <<'PY'
import json, sys, datetime
tmp, out_path, seq = sys.argv[1], sys.argv[2], int(sys.argv[3])
MiB = 1048576.0
rows = []
for run in sys.argv[4:]:
    cp, mode = run.split(":")
    name = f"{cp}_{mode}"
    mem = [json.loads(l)["mem"] for l in open(f"{tmp}/{name}/metrics.jsonl") if '"mem"' in l][-1]
    plan = json.load(open(f"{tmp}/{name}.plan.json"))
    measured = max(r["activations"]["peak"] for r in mem)
    predicted = max(r["category_peak"]["activations"] for r in plan["ranks"])
    rows.append({"cp": int(cp), "mode": mode, "measured_activation_peak": measured, "planned_activation_peak": predicted})
base = rows[0]["measured_activation_peak"]
print(f"activation peak per rank, seq_len {seq}, micro-batch 2, 4 layers x 128")
print(f"{'cp':>3} {'mode':>8} {'measured MiB':>13} {'planned MiB':>12} {'vs cp=1':>8} {'ideal 1/cp':>10}")
for r in rows:
    r["ratio_to_cp1"] = r["measured_activation_peak"] / base
    print(f"{r['cp']:>3} {r['mode']:>8} {r['measured_activation_peak'] / MiB:>13.3f} {r['planned_activation_peak'] / MiB:>12.3f} "
          f"{r['ratio_to_cp1']:>8.3f} {1 / r['cp']:>10.3f}")
json.dump({"date": datetime.datetime.now().isoformat(timespec="seconds"), "seq_len": seq, "runs": rows},
          open(out_path, "w"), indent=1)
print(f"wrote {out_path}")
PY
