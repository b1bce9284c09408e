#!/usr/bin/env bash
# Expert parallelism against data parallelism on the same ranks, and its all-to-all bytes against
# theory: the MoE model of bench/moe_vs_dense.sh (LLaMA, 4 layers x C 256, E experts of width F,
# top-K, seq_len 256, micro-batch 8) trained by 2 ranks x 1 thread as dp 2 and as ep 2, interleaved
# REPS times (and ep 4 on 4 oversubscribed ranks once, for the bytes). Theory per step and rank:
# grad_accum x MoE layers x 4 exchanges (rows out, outputs back, their gradients both ways) x
# B T K rows x C x 4 bytes, sent + kept; under uniform routing (ep-1)/ep of it leaves the rank.
# Writes bench/results/expert_parallel.json.
# Usage: bench/expert_parallel.sh [build_dir] [steps=8]   (env: E=8 K=2 F=384 REPS=2)
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
STEPS=${2:-8}
E=${E:-8}; K=${K:-2}; F=${F:-384}; REPS=${REPS:-2}
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
B=8; T=256; C=256; L=4
BASE="model.preset=tiny-llama model.n_layer=$L model.d_model=$C model.n_head=4 model.n_kv_head=4 model.max_seq_len=$T
      model.d_ff=$F model.moe_experts=$E model.moe_top_k=$K data.seq_len=$T data.dir=$TMP/kjv train.micro_batch=$B
      train.batch_tokens=$((4 * B * T)) train.steps=$STEPS train.eval_interval=0 train.log_interval=1000 train.threads=1"
run() {  # run <label> <np> <overrides...>: prints the "done:" line
  local label=$1 np=$2; shift 2
  # shellcheck disable=SC2086  # $BASE is a list of overrides
  OMP_NUM_THREADS=1 ${MPIEXEC:-mpiexec} --allow-run-as-root --oversubscribe -np "$np" "$TESSERA" train \
    --config "$HERE/tests/configs/tiny.toml" $BASE "$@" train.out_dir="$TMP/$label" > "$TMP/$label.log"
  grep '^done:' "$TMP/$label.log"
}
LINES=()
for rep in $(seq 1 "$REPS"); do
  LINES+=("dp2 $(run "r${rep}_dp2" 2 parallel.dp=2)")
  LINES+=("ep2 $(run "r${rep}_ep2" 2 parallel.ep=2)")
done
LINES+=("ep4 $(run ep4 4 parallel.ep=4)")
printf '%s\n' "${LINES[@]}" > "$TMP/done_lines.txt"
/usr/bin/python3 - "$TMP/done_lines.txt" "$OUT/expert_parallel.json" "$B" "$T" "$C" "$L" "$E" "$K" "$STEPS" <<'PY'
import json, re, sys
lines, out, (B, T, C, L, E, K, steps) = sys.argv[1], sys.argv[2], map(int, sys.argv[3:])
runs = []
for line in open(lines):
    label, done = line.split(" ", 1)
    tok = float(re.search(r"([0-9.]+) tok/s", done).group(1))
    r = {"layout": label, "tok_s": tok}
    m = re.search(r"all-to-all ([0-9.]+) MiB/step sent per rank \(\+([0-9.]+) kept\), ([0-9.]+)% of step time", done)
    if m:
        ep = int(label[2:])
        accum = 4 // ep  # batch_tokens = 4 B T over ep data ranks
        theory = accum * L * 4 * B * T * K * C * 4 / 2**20
        sent, kept = float(m.group(1)), float(m.group(2))
        r.update(ep=ep, sent_mib=sent, kept_mib=kept, theory_total_mib=theory, total_vs_theory=(sent + kept) / theory,
                 sent_share=sent / (sent + kept), uniform_sent_share=(ep - 1) / ep, exchange_share=float(m.group(3)) / 100)
    runs.append(r)
print(f"\n{'layout':>6} {'tok/s':>8} {'sent MiB':>9} {'kept MiB':>9} {'theory':>8} {'total/theory':>12} {'sent share':>10} {'uniform':>7} {'a2a time':>8}")
for r in runs:
    if "ep" in r:
        print(f"{r['layout']:>6} {r['tok_s']:>8.0f} {r['sent_mib']:>9.2f} {r['kept_mib']:>9.2f} {r['theory_total_mib']:>8.2f} "
              f"{r['total_vs_theory']:>12.3f} {r['sent_share']:>10.2f} {r['uniform_sent_share']:>7.2f} {100 * r['exchange_share']:>7.1f}%")
    else:
        print(f"{r['layout']:>6} {r['tok_s']:>8.0f}")
dp = [r["tok_s"] for r in runs if r["layout"] == "dp2"]
ep = [r["tok_s"] for r in runs if r["layout"] == "ep2"]
print(f"ep2 / dp2 tokens/s: " + ", ".join(f"{e / d:.2f}" for d, e in zip(dp, ep)))
json.dump({"model": {"n_layer": L, "d_model": C, "experts": E, "top_k": K, "seq_len": T, "micro_batch": B},
           "steps": steps, "runs": runs, "ep2_over_dp2": [e / d for d, e in zip(dp, ep)]}, open(out, "w"), indent=1)
PY
