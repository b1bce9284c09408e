#!/usr/bin/env bash
# Parameter server vs all-reduce on bench-small, 4 ranks x 1 thread, the same global batch
# (3 workers x micro_batch MB x seq_len SEQ) and the same data:
#   allreduce  parallel.dp=3 (3 ranks; the PS runs spend the 4th rank on the server)
#   ps_sync / ps_async / ps_ssp  3 workers + 1 server (ps.staleness = STALENESS)
# each for STEPS steps, then validation on EVAL_BATCHES batches; then the same four with worker 1
# slowed FACTORx (TESSERA_FAULT="slow:rank=1:step=1:factor=F"). Reports time per step (the lead's
# mean), samples per second of all workers together (pushes answered by the server / wall time of the
# training; all-reduce: steps x 3 / time), bytes sent per worker per step, and the validation loss.
# Writes bench/results/param_server.json.
# Usage: bench/param_server.sh [build_dir]   (env: STEPS=20 MB=4 SEQ=256 EVAL_BATCHES=8 STALENESS=2 FACTOR=2)
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
STEPS=${STEPS:-20}; MB=${MB:-4}; SEQ=${SEQ:-256}; EVAL_BATCHES=${EVAL_BATCHES:-8}; STALENESS=${STALENESS:-2}
FACTOR=${FACTOR:-2}; MODEL=bench-small; W=3
source "$(dirname "$0")/lib.sh"
run() {  # run <label> <np> <fault or ""> overrides...
  local label=$1 np=$2 fault=$3; shift 3
  local t0 t1
  t0=$(date +%s.%N)
  TESSERA_FAULT=$fault mpirun --allow-run-as-root --oversubscribe -x TESSERA_FAULT -np "$np" "$TESSERA" train \
    --config "$HERE/tests/configs/tiny.toml" model.preset=$MODEL data.dir="$TMP/kjv" data.seq_len="$SEQ" \
    train.threads=1 train.micro_batch="$MB" train.batch_tokens=$((MB * SEQ * W)) parallel.dp=$W \
    train.steps="$STEPS" train.eval_interval="$STEPS" train.eval_batches="$EVAL_BATCHES" train.log_interval=1 \
    train.timeout_s=600 train.out_dir="$TMP/$label" "$@" > "$TMP/$label.log" 2>&1 || { cat "$TMP/$label.log"; exit 1; }
  t1=$(date +%s.%N)
  echo "$label $(echo "$t1 - $t0" | bc)" >> "$TMP/wall.txt"
  echo "$label done" >&2
}
for slow in "" "slow:rank=1:step=1:factor=$FACTOR"; do
  tag=${slow:+_slow}
  run "allreduce$tag" $W "$slow"
  for c in sync async ssp; do
    run "ps_$c$tag" $((W + 1)) "$slow" parallel.mode=ps ps.consistency=$c ps.staleness="$STALENESS"
  done
done
/usr/bin/python3 - "$TMP" "$OUT/param_server.json" "$STEPS" "$MB" "$SEQ" "$W" "$FACTOR" "$STALENESS" <<'PY'
import json, re, sys
tmp, out, steps, mb, seq, W, factor, staleness = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6]), int(sys.argv[6]), sys.argv[7], sys.argv[8]
rows = []
for label in ["allreduce", "ps_sync", "ps_async", "ps_ssp", "allreduce_slow", "ps_sync_slow", "ps_async_slow", "ps_ssp_slow"]:
    recs = [json.loads(l) for l in open(f"{tmp}/{label}/metrics.jsonl")]
    train = [r for r in recs if "loss" in r and "time_s" in r]
    val = [r["val_loss"] for r in recs if "val_loss" in r][-1]
    # Lead's time per step, steps 2..N (the first warms caches).
    step_s = (train[-1]["time_s"] - train[0]["time_s"]) / (len(train) - 1)
    log = open(f"{tmp}/{label}.log").read()
    if label.startswith("ps"):
        pushes = [json.loads(l) for l in open(f"{tmp}/{label}/ps_server0.jsonl")]
        first = [p for p in pushes if p["step"] == 1]
        span = pushes[-1]["t"] - max(p["t"] for p in first)   # after every worker's first step
        samples_s = (len(pushes) - len(first)) * mb / span
        m = re.search(r"pushed ([0-9.]+) MiB \+ pulled ([0-9.]+) MiB", log)
        mib = float(m.group(1)) + float(m.group(2))
        ahead = max(p["step"] - p["slowest"] for p in pushes)
    else:
        samples_s = (len(train) - 1) * W * mb / (train[-1]["time_s"] - train[0]["time_s"])
        mib = float(re.search(r"data-parallel traffic ([0-9.]+) MiB/step", log).group(1))
        ahead = 0
    rows.append({"run": label, "step_s": step_s, "samples_per_s": samples_s, "mib_per_worker_step": mib,
                 "val_loss": val, "max_steps_ahead": ahead})
ref = {r["run"]: r for r in rows}
print(f"\n{'run':<16} {'s/step':>7} {'samples/s':>10} {'vs sync':>8} {'MiB/step/worker':>16} {'val loss':>9} {'max ahead':>10}")
for r in rows:
    sync = ref["ps_sync_slow" if r["run"].endswith("_slow") else "ps_sync"]
    r["samples_vs_ps_sync"] = r["samples_per_s"] / sync["samples_per_s"]
    print(f"{r['run']:<16} {r['step_s']:>7.3f} {r['samples_per_s']:>10.2f} {r['samples_vs_ps_sync']:>8.2f} "
          f"{r['mib_per_worker_step']:>16.2f} {r['val_loss']:>9.4f} {r['max_steps_ahead']:>10}")
print(f"(bench-small, {W} workers x micro_batch {mb} x seq_len {seq}, {steps} steps; PS runs add 1 server rank; "
      f"_slow: worker 1 slowed {factor}x; ssp staleness {staleness})")
json.dump({"model": "bench-small", "workers": W, "micro_batch": mb, "seq_len": seq, "steps": steps,
           "slow_factor": float(factor), "staleness": int(staleness), "rows": rows}, open(out, "w"), indent=1)
PY
