#!/usr/bin/env bash
# The memory planner against the allocator: for each layout below, `tessera plan --json` predicts every
# rank's peak (plan/memory_plan.h) and `tessera train` runs a few steps; the measured peak is each
# rank's total_peak of the allocator's counters in the last metrics.jsonl line ("mem", gathered from
# every rank). Prints per rank the predicted and measured peak MiB and the relative error, the
# categories where they differ by more than 1 %, and writes bench/results/plan_vs_measured.json.
# The model: tiny widened to 4 layers of width 128 (0.9M parameters; byte-level KJV), micro-batch 4 x 64.
# Usage: bench/plan_vs_measured.sh [build_dir] [steps]
#   (env: TARGET=0.10 relative error allowed; TIMEOUT=240 per run; ONLY=label,label to run a subset;
#    RESULT=name: bench/results/<name>.json instead)
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
STEPS=${2:-3}
TARGET=${TARGET:-0.10}
TIMEOUT=${TIMEOUT:-240}
HERE=$(cd "$(dirname "$0")/.." && pwd)
OUT=$HERE/bench/results
TESSERA=$(cd "$BUILD" && pwd)/src/cli/tessera
CONFIG=$HERE/tests/configs/tiny.toml
mkdir -p "$OUT"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
"$TESSERA" prepare --kjv --tokenizer byte --out "$TMP/kjv" >/dev/null 2>&1

BASE="model.n_layer=4 model.d_model=128 model.d_ff=512 data.seq_len=64 train.micro_batch=4 train.threads=1
      train.eval_interval=0 train.log_interval=1 train.steps=$STEPS data.dir=$TMP/kjv"
LLAMA="model.preset=tiny-llama model.n_layer=4 model.d_model=128 model.n_head=4 model.n_kv_head=2 model.d_ff=352"
# tiny-moe widened like the rest: 4 of 4 layers MoE, 4 experts, top-2 (owner-only expert storage at ep 2)
MOE="model.preset=tiny-moe model.n_layer=4 model.d_model=128 model.n_head=4 model.n_kv_head=2 model.d_ff=352"
CONFIGS=(  # label|ranks|overrides
  "dp1|1|"
  "dp2|2|parallel.dp=2 train.batch_tokens=512"
  "tp2|2|parallel.tp=2"
  "tp2_sp|2|parallel.tp=2 parallel.sequence_parallel=true"
  "pp2_1f1b|2|parallel.pp=2 train.batch_tokens=1024"
  "pp2_gpipe|2|parallel.pp=2 parallel.schedule=gpipe train.batch_tokens=1024"
  "pp2_interleaved|2|parallel.pp=2 parallel.schedule=interleaved parallel.virtual_stages=2 train.batch_tokens=1024"
  "pp2_interleaved_head_alone|2|parallel.pp=2 parallel.schedule=interleaved parallel.virtual_stages=2 parallel.stage_layers=1,1,2,0 train.batch_tokens=1024"
  "dp1_selective|1|train.recompute=selective"
  "dp1_full|1|train.recompute=full"
  "tp2_full|2|parallel.tp=2 train.recompute=full"
  "pp2_1f1b_full|2|parallel.pp=2 train.batch_tokens=1024 train.recompute=full"
  "dp2_zero1|2|parallel.dp=2 parallel.zero=1 train.batch_tokens=512"
  "dp2_zero2|2|parallel.dp=2 parallel.zero=2 train.batch_tokens=512"
  "dp2_zero3|2|parallel.dp=2 parallel.zero=3 train.batch_tokens=512"
  "dp2_zero3_accum2|2|parallel.dp=2 parallel.zero=3 train.batch_tokens=1024"
  "llama_dp2_zero2|2|$LLAMA parallel.dp=2 parallel.zero=2 train.batch_tokens=512"
  "llama_pp2_dp2_zero3|4|$LLAMA parallel.pp=2 parallel.dp=2 parallel.zero=3 train.batch_tokens=2048"
  "llama_dp2_tp2_zero3_selective|4|$LLAMA parallel.dp=2 parallel.tp=2 parallel.zero=3 train.recompute=selective train.batch_tokens=512"
  "dp2_tp2_zero1_sp|4|parallel.dp=2 parallel.tp=2 parallel.zero=1 parallel.sequence_parallel=true train.batch_tokens=512"
  "cp2|2|parallel.cp=2"
  "cp4_selective|4|parallel.cp=4 train.recompute=selective"
  "llama_dp2_cp2_zero2|4|$LLAMA parallel.dp=2 parallel.cp=2 parallel.zero=2 train.batch_tokens=512"
  "ring2|2|parallel.cp=2 parallel.cp_mode=ring"
  "llama_ring4_zero1_selective|4|$LLAMA parallel.cp=4 parallel.cp_mode=ring parallel.zero=1 train.recompute=selective"
  "moe_dp2|2|$MOE parallel.dp=2 train.batch_tokens=512"
  "moe_ep2|2|$MOE parallel.ep=2 train.batch_tokens=512"
  "moe_dp2_ep2|4|$MOE parallel.dp=2 parallel.ep=2 train.batch_tokens=1024"
  "moe_dp2_ep2_zero1|4|$MOE parallel.dp=2 parallel.ep=2 parallel.zero=1 train.batch_tokens=1024"
)

: > "$TMP/runs.txt"
for entry in "${CONFIGS[@]}"; do
  IFS='|' read -r label np over <<< "$entry"
  if [[ -n ${ONLY:-} && ,$ONLY, != *,$label,* ]]; then continue; fi
  run=$TMP/$label
  # shellcheck disable=SC2086  # $BASE and $over are lists of overrides
  if ! "$TESSERA" plan --config "$CONFIG" $BASE $over --json > "$run.plan.json" 2> "$run.plan.err"; then
    echo "$label: plan failed: $(cat "$run.plan.err")" >&2
    echo "$label|$np|$over|plan_failed" >> "$TMP/runs.txt"
    continue
  fi
  # shellcheck disable=SC2086
  if timeout "$TIMEOUT" mpirun --allow-run-as-root --oversubscribe -np "$np" \
      "$TESSERA" train --config "$CONFIG" $BASE $over train.out_dir="$run" --quiet > "$run.log" 2>&1; then
    echo "$label|$np|$over|ok" >> "$TMP/runs.txt"
  else
    echo "$label: train failed: $(tail -3 "$run.log")" >&2
    echo "$label|$np|$over|train_failed" >> "$TMP/runs.txt"
  fi
done

/usr/bin/python3 - "$TMP" "$OUT/${RESULT:-plan_vs_measured}.json" "$TARGET" "$STEPS" <<'PY'
import json, sys, datetime
tmp, out_path, target, steps = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
MiB = 1048576.0
CATS = ["parameters", "gradients", "optimizer_state", "activations", "communication", "other"]
results, rows, worst = [], [], 0.0
for line in open(f"{tmp}/runs.txt"):
    label, np_, over, state = line.rstrip("\n").split("|")
    entry = {"label": label, "ranks": int(np_), "overrides": over, "state": state}
    results.append(entry)
    if state != "ok":
        continue
    plan = json.load(open(f"{tmp}/{label}.plan.json"))
    mem = None
    for l in open(f"{tmp}/{label}/metrics.jsonl"):
        ev = json.loads(l)
        if "mem" in ev:
            mem = ev["mem"]
    entry["layout"] = plan["layout"]
    entry["per_rank"] = []
    for r in plan["ranks"]:
        m = mem[r["rank"]]
        meas = m["total"]["peak"]
        pred = r["peak"]
        err = (pred - meas) / meas
        worst = max(worst, abs(err))
        cat_diffs = {c: [r["category_peak"][c], m[c]["peak"]] for c in CATS
                     if abs(r["category_peak"][c] - m[c]["peak"]) > 0.01 * max(1, m[c]["peak"])}
        entry["per_rank"].append({"rank": r["rank"], "predicted_peak": pred, "measured_peak": meas,
                                  "relative_error": err, "predicted_category_peak": r["category_peak"],
                                  "measured": m, "categories_off_by_1pct": cat_diffs})
        rows.append((label, r["rank"], pred / MiB, meas / MiB, err,
                     ", ".join(f"{c} {p / MiB:.2f}/{q / MiB:.2f}" for c, (p, q) in cat_diffs.items())))
print(f"{'config':<30} {'rank':>4} {'predicted MiB':>14} {'measured MiB':>13} {'rel.err':>8}  categories off by >1% (predicted/measured peak MiB)")
for label, rank, p, m, e, d in rows:
    print(f"{label:<30} {rank:>4} {p:>14.3f} {m:>13.3f} {100 * e:>7.2f}%  {d}")
failed = [r["label"] for r in results if r["state"] != "ok"]
ok = worst <= target and not failed
print(f"worst |relative error| {100 * worst:.2f}% (target {100 * target:.0f}%): {'met' if ok else 'NOT met'}"
      + (f"; failed: {', '.join(failed)}" if failed else ""))
json.dump({"date": datetime.datetime.now().isoformat(timespec="seconds"), "steps": steps, "target": target,
           "worst_relative_error": worst, "met": ok, "configs": results}, open(out_path, "w"), indent=1)
print(f"wrote {out_path}")
sys.exit(0 if ok else 1)
PY
