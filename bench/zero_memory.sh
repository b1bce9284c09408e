#!/usr/bin/env bash
# ZeRO memory and traffic benchmark: per-rank model-state memory (parameters + gradients + AdamW
# moments, the allocator's live bytes at a step boundary, paged buffers measured with mincore) for
# ZeRO stages 0-3 at dp = 1, 2, 4, against theory for fp32 Adam with P parameters per replica:
#   stage 0: 16P   stage 1: 8P + 8P/dp   stage 2: 4P + 12P/dp   stage 3: 16P/dp
# and the data-parallel traffic per step (ring model, the trainer's done line) of each stage against
# plain data parallelism (theory: stages 1 and 2 = 1x, stage 3 = 1.5x, one micro-batch per step).
# Also reports the peak (during the step) and the communication buffers, which theory leaves out.
# Model: bench-small's layers with a byte vocabulary (so no single tensor dominates), seq_len 64,
# micro_batch 1, one micro-batch per step, 3 steps, 1 thread per rank. Writes bench/results/zero_memory.json.
# Usage: bench/zero_memory.sh [build_dir]
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
source "$(dirname "$0")/lib.sh"
for dp in 1 2 4; do
  for zero in 0 1 2 3; do
    echo "== dp=$dp zero=$zero" >&2
    mpirun --allow-run-as-root --oversubscribe -np "$dp" "$TESSERA" train --config "$HERE/tests/configs/tiny.toml" \
      model.preset=bench-small model.vocab_size=256 data.dir="$TMP/kjv" data.seq_len=64 parallel.dp="$dp" \
      parallel.zero="$zero" train.threads=1 train.micro_batch=1 train.batch_tokens=$((64 * dp)) train.steps=3 \
      train.eval_interval=0 train.log_interval=1 train.timeout_s=300 train.out_dir="$TMP/dp${dp}_z${zero}" \
      > "$TMP/dp${dp}_z${zero}.log" 2>&1 || { cat "$TMP/dp${dp}_z${zero}.log" >&2; exit 1; }
  done
done
/usr/bin/python3 - "$TMP" "$OUT/zero_memory.json" <<'PY'
import json, re, sys
tmp, out = sys.argv[1], sys.argv[2]
MiB = 2 ** 20
rows = []
for dp in (1, 2, 4):
    base_traffic = None
    for zero in (0, 1, 2, 3):
        run = f"{tmp}/dp{dp}_z{zero}"
        events = [json.loads(l) for l in open(f"{run}/metrics.jsonl") if '"loss"' in l]
        last = events[-1]
        cfg = json.load(open(f"{run}/config.json")) if False else None
        ranks = last["mem"]
        state = [sum(r[c]["live"] for c in ("parameters", "gradients", "optimizer_state")) for r in ranks]
        peak = [sum(r[c]["peak"] for c in ("parameters", "gradients", "optimizer_state")) for r in ranks]
        comm = [r["communication"]["peak"] for r in ranks]
        done = open(f"{run}.log").read()
        traffic = float(re.search(r"data-parallel traffic ([0-9.]+) MiB/step", done).group(1)) if dp > 1 else 0.0
        if zero == 0:
            base_traffic = traffic
        rows.append({"dp": dp, "zero": zero, "model_state_live_mib": max(state) / MiB,
                     "model_state_peak_mib": max(peak) / MiB, "comm_buffers_mib": max(comm) / MiB,
                     "traffic_mib_per_step": traffic,
                     "traffic_vs_stage0": traffic / base_traffic if base_traffic else None,
                     "loss_step3": last["loss"]})
# P from stage 0 at dp 1: 16 bytes per parameter (the flat buffers include 64-byte alignment padding).
P = rows[0]["model_state_live_mib"] / 16
theory = {0: lambda d: 16, 1: lambda d: 8 + 8 / d, 2: lambda d: 4 + 12 / d, 3: lambda d: 16 / d}
print(f"{'dp':>2} {'zero':>4} {'state MiB':>10} {'theory':>8} {'ratio':>6} {'peak MiB':>9} {'comm MiB':>9} {'traffic':>8} {'vs z0':>6} {'loss':>9}")
for r in rows:
    r["theory_mib"] = P * theory[r["zero"]](r["dp"])
    r["measured_vs_theory"] = r["model_state_live_mib"] / r["theory_mib"]
    vs = f"{r['traffic_vs_stage0']:.2f}" if r["traffic_vs_stage0"] else "-"
    print(f"{r['dp']:>2} {r['zero']:>4} {r['model_state_live_mib']:>10.2f} {r['theory_mib']:>8.2f} "
          f"{r['measured_vs_theory']:>6.3f} {r['model_state_peak_mib']:>9.2f} {r['comm_buffers_mib']:>9.2f} "
          f"{r['traffic_mib_per_step']:>8.2f} {vs:>6} {r['loss_step3']:>9.5f}")
json.dump({"model": "bench-small layers, vocab 256", "P_mib_per_4_bytes": P, "rows": rows}, open(out, "w"), indent=1)
PY
