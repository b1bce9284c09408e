#!/usr/bin/env bash
# The step-time model against published GPU throughput: Megatron-LM's weak-scaling table (Narayanan
# et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC'21,
# Table 1: GPT models of 1.7B to 1T parameters on DGX A100 80 GB nodes of Selene, sequence 2048,
# vocabulary 51200, mixed precision, activation recomputation), each layout fed to
# `tessera plan --hardware configs/hardware/a100-80gb-8x.toml --json`. The paper reports TFLOP/s per GPU
# counted as 96 B s l h^2 (1 + s/6h + V/16lh) per iteration (recomputation included); the published
# step time is that count / (TFLOP/s x GPUs), compared with the predicted step_s.
# The rows were written down from the paper's Table 1 without the paper at hand (no network here):
# check them against it before relying on them.
# Assumptions (the paper's text does not pin them for every row): micro-batch 1, the non-interleaved
# 1F1B schedule, bf16 peak (= fp16 peak on A100), full recomputation.
# Usage: bench/published_gpu_check.sh [build_dir]
#   env: HARDWARE=configs/hardware/a100-80gb-8x.toml, RESULT=bench/results/published_gpu_check.json,
#        MAX_ERROR=0.20 (exit 1 when a row's |error| is above it; the test suite runs it so)
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
HERE=$(cd "$(dirname "$0")/.." && pwd)
HW=${HARDWARE:-$HERE/configs/hardware/a100-80gb-8x.toml}
RESULT=${RESULT:-$HERE/bench/results/published_gpu_check.json}
MAX_ERROR=${MAX_ERROR:-0.20}
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
ROWS=(  # params_B|heads|hidden|layers|tp|pp|gpus|batch|published TFLOP/s per GPU
  "1.7|24|2304|24|1|1|32|512|137"
  "3.6|32|3072|30|2|1|64|512|138"
  "7.5|32|4096|36|4|1|128|512|142"
  "18.4|48|6144|40|8|1|256|1024|135"
  "39.1|64|8192|48|8|2|512|1536|138"
  "76.1|80|10240|60|8|4|1024|1792|140"
  "145.6|96|12288|80|8|8|1536|2304|148"
  "310.1|128|16384|96|8|16|1920|2160|155"
  "529.6|128|20480|105|8|35|2520|2520|163"
  "1008.0|160|25600|128|8|64|3072|3072|163"
)
: > "$TMP/rows.txt"
for row in "${ROWS[@]}"; do
  IFS='|' read -r P a h l tp pp gpus batch tflops <<< "$row"
  dp=$((gpus / (tp * pp)))
  "$BUILD/src/cli/tessera" plan --config "$HERE/tests/configs/tiny.toml" model.preset=gpt2 model.vocab_size=51200 \
    model.max_seq_len=2048 model.n_layer="$l" model.d_model="$h" model.n_head="$a" model.n_kv_head="$a" \
    model.d_ff=$((4 * h)) data.seq_len=2048 train.micro_batch=1 train.batch_tokens=$((batch * 2048)) \
    parallel.dp=$dp parallel.tp="$tp" parallel.pp="$pp" train.precision=bf16 train.recompute=full \
    --hardware "$HW" --json > "$TMP/$P.json"
  echo "$row" >> "$TMP/rows.txt"
done
/usr/bin/python3 - "$TMP" "$RESULT" "$MAX_ERROR" <<'PY'
import json, sys
tmp, out, max_error = sys.argv[1], sys.argv[2], float(sys.argv[3])
res, worst = [], 0
print(f"{'params':>8} {'tp':>3} {'pp':>3} {'GPUs':>5} {'published s':>12} {'predicted s':>12} {'error':>7}  "
      f"{'pub TFLOP/s':>11} {'pred TFLOP/s':>12}  predicted breakdown (s)")
for line in open(f"{tmp}/rows.txt"):
    P, a, h, l, tp, pp, gpus, batch, tflops = line.strip().split("|")
    h, l, gpus, batch, tflops, s, V = int(h), int(l), int(gpus), int(batch), float(tflops), 2048, 51200
    flops = 96 * batch * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    published = flops / (tflops * 1e12 * gpus)
    st = json.load(open(f"{tmp}/{P}.json"))["step_time"]
    pred = st["step_s"]
    err = pred / published - 1
    worst = max(worst, abs(err))
    b = st["breakdown"]
    parts = ", ".join(f"{k[:-2]} {v:.2f}" for k, v in b.items() if v > 0.005 * pred and k != "dp_comm_total_s")
    print(f"{P + 'B':>8} {tp:>3} {pp:>3} {gpus:>5} {published:>12.2f} {pred:>12.2f} {100 * err:>6.1f}%  "
          f"{tflops:>11.0f} {flops / (pred * gpus) / 1e12:>12.0f}  {parts}")
    res.append({"params_B": float(P), "tp": int(tp), "pp": int(pp), "gpus": gpus, "batch": batch,
                "published_tflops_per_gpu": tflops, "published_step_s": published, "predicted": st, "error": err})
print(f"worst |error| {100 * worst:.1f}%")
json.dump({"source": "Narayanan et al. SC'21 Table 1", "rows": res}, open(out, "w"), indent=1)
print(f"wrote {out}")
if worst > max_error:
    sys.exit(f"worst |error| {100 * worst:.1f}% is above {100 * max_error:.0f}%")
PY
