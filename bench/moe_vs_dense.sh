#!/usr/bin/env bash
# Mixture of experts against a dense model of the same active parameters, one process, interleaved
# REPS times: tiny-moe's family widened (LLaMA, 4 layers, C 256, 4 heads, seq_len 256, micro-batch 8)
# with E experts of width F, top-K, against the dense model with d_ff = K x F (the same matmul FLOPs
# per token in the MLP; the MoE model adds the router, the dispatch and the combine, and holds E/K
# times the MLP parameters). tokens/s from the trainer's "done:" line. Writes bench/results/moe_vs_dense.json.
# Usage: bench/moe_vs_dense.sh [build_dir] [steps=12]   (env: E=8 K=2 F=384 THREADS=2 REPS=2)
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
STEPS=${2:-12}
E=${E:-8}; K=${K:-2}; F=${F:-384}; THREADS=${THREADS:-2}; REPS=${REPS:-2}
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
BASE="model.preset=tiny-llama model.n_layer=4 model.d_model=256 model.n_head=4 model.n_kv_head=4 model.max_seq_len=256
      data.seq_len=256 data.dir=$TMP/kjv train.micro_batch=8 train.batch_tokens=2048 train.steps=$STEPS
      train.eval_interval=0 train.log_interval=1000 train.threads=$THREADS"
run() {  # run <label> <overrides...>: prints tok/s
  local label=$1; shift
  # shellcheck disable=SC2086  # $BASE is a list of overrides
  OMP_NUM_THREADS=$THREADS "$TESSERA" train --config "$HERE/tests/configs/tiny.toml" $BASE "$@" \
    train.out_dir="$TMP/$label" > "$TMP/$label.log"
  done_tok_s "$TMP/$label.log"
}
RESULTS=()
for rep in $(seq 1 "$REPS"); do
  dense=$(run "r${rep}_dense" model.d_ff=$((K * F)))
  moe=$(run "r${rep}_moe" model.d_ff="$F" model.moe_experts="$E" model.moe_top_k="$K")
  echo "rep $rep: dense $dense tok/s, moe $moe tok/s" >&2
  RESULTS+=("$dense" "$moe")
done
/usr/bin/python3 - "$OUT/moe_vs_dense.json" "$E" "$K" "$F" "$THREADS" "$STEPS" "${RESULTS[@]}" <<'PY'
import json, sys
out, E, K, F, threads, steps = sys.argv[1:7]
vals = [float(v) for v in sys.argv[7:]]
pairs = [(vals[i], vals[i + 1]) for i in range(0, len(vals), 2)]
print(f"\n{'rep':>3} {'dense tok/s':>12} {'moe tok/s':>10} {'moe/dense':>9}")
for i, (d, m) in enumerate(pairs, 1):
    print(f"{i:>3} {d:>12.0f} {m:>10.0f} {m / d:>9.2f}")
print(f"MoE: {E} experts of width {F}, top-{K}; dense: d_ff {int(K) * int(F)}; {threads} threads, {steps} steps")
json.dump({"experts": int(E), "top_k": int(K), "expert_width": int(F), "dense_d_ff": int(K) * int(F),
           "threads": int(threads), "steps": int(steps),
           "pairs": [{"dense_tok_s": d, "moe_tok_s": m, "ratio": m / d} for d, m in pairs]}, open(out, "w"), indent=1)
PY
