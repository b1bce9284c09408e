#!/usr/bin/env bash
# Model-parallel memory and tensor-parallel traffic against theory, from the trainer's own counters
# (metrics.jsonl "mem": each rank's allocator peaks per category; the done line: traffic per step of
# the tp communicator, ring model):
#   1. activation peak per pipeline stage, GPipe vs 1F1B, as the micro-batches per step grow
#      (pp=2, m = 2, 4, 8): GPipe keeps m micro-batches' activations, 1F1B at most pp - stage;
#   2. parameter bytes per rank at tp = 1, 2, 4 against whole/tp + the replicated tensors
#      (norms, position embedding, row-parallel biases);
#   3. tp traffic per step against theory: per micro-batch, 4 all-reduces of B*T*C floats per layer
#      (attention and MLP outputs forward, their inputs' gradients backward) + the embedding (forward)
#      + the head's input gradient (backward), each 2(p-1)/p of its bytes on the wire; the
#      cross-entropy statistics (3 floats per token) are small and listed apart.
# Model: tiny (GPT-2 family, C=64, NH=4) with 4 layers, seq_len 64, micro_batch 4, 1 thread per rank.
# Writes bench/results/model_parallel_memory.json.  Usage: bench/model_parallel_memory.sh [build_dir]
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
source "$(dirname "$0")/lib.sh"
run() {  # label np overrides...
  local label=$1 np=$2; shift 2
  mpirun --allow-run-as-root --oversubscribe -np "$np" "$TESSERA" train --config "$HERE/tests/configs/tiny.toml" \
    model.n_layer=4 data.dir="$TMP/kjv" data.seq_len=64 train.threads=1 train.micro_batch=4 train.steps=3 \
    train.eval_interval=0 train.log_interval=1 train.timeout_s=300 train.out_dir="$TMP/$label" "$@" \
    > "$TMP/$label.log" 2>&1 || { cat "$TMP/$label.log" >&2; exit 1; }
}
for m in 2 4 8; do
  for sched in gpipe 1f1b; do
    echo "== pp=2 $sched m=$m" >&2
    run "pp_${sched}_m$m" 2 parallel.pp=2 parallel.schedule=$sched train.batch_tokens=$((256 * m))
  done
done
for tp in 1 2 4; do
  echo "== tp=$tp" >&2
  run "tp$tp" "$tp" parallel.tp=$tp train.batch_tokens=512
done
/usr/bin/python3 - "$TMP" "$OUT/model_parallel_memory.json" <<'PY'
import json, re, sys
tmp, out = sys.argv[1], sys.argv[2]
KiB = 1024
def last_mem(label):
    ev = [json.loads(l) for l in open(f"{tmp}/{label}/metrics.jsonl") if '"mem"' in l]
    return ev[-1]["mem"]
res = {"activations": [], "tp_params": [], "tp_traffic": []}
print("1. activation peak per stage (KiB), pp=2")
print(f"{'m':>3} {'gpipe s0':>9} {'gpipe s1':>9} {'1f1b s0':>9} {'1f1b s1':>9}")
for m in (2, 4, 8):
    row = {"m": m}
    for sched in ("gpipe", "1f1b"):
        mem = last_mem(f"pp_{sched}_m{m}")
        row[sched] = [r["activations"]["peak"] / KiB for r in mem]
    res["activations"].append(row)
    print(f"{m:>3} {row['gpipe'][0]:>9.0f} {row['gpipe'][1]:>9.0f} {row['1f1b'][0]:>9.0f} {row['1f1b'][1]:>9.0f}")
C, L, T_max, V, F = 64, 4, 64, 256, 256  # the tiny preset (max_seq_len 64)
whole = V * C + T_max * C + L * (2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + F * C + F + C * F + C) + 2 * C
replicated = T_max * C + L * (2 * C + C + 2 * C + C) + 2 * C  # wpe, ln1, attn.proj.b, ln2, mlp.proj.b, lnf
print("2. parameter bytes per rank (KiB) vs whole/tp + replicated (1 - 1/tp)")
for tp in (1, 2, 4):
    mem = last_mem(f"tp{tp}")
    meas = max(r["parameters"]["peak"] for r in mem) / KiB
    theory = 4 * (whole / tp + replicated * (1 - 1 / tp)) / KiB
    res["tp_params"].append({"tp": tp, "measured_kib": meas, "theory_kib": theory, "ratio": meas / theory})
    print(f"  tp={tp}: {meas:8.1f} KiB, theory {theory:8.1f} KiB (ratio {meas / theory:.3f})")
print("3. tp traffic per step and rank (ring model) vs theory")
B, T = 4, 64
for tp in (2, 4):
    done = open(f"{tmp}/tp{tp}.log").read()
    meas = float(re.search(r"\(tp ([0-9.]+), pp", done).group(1))
    m = 512 // (B * T)
    wire = 2 * (tp - 1) / tp
    main = m * (4 * L + 2) * wire * B * T * C * 4 / 2**20
    ce = m * wire * B * T * 3 * 4 / 2**20
    res["tp_traffic"].append({"tp": tp, "measured_mib": meas, "theory_mib": main + ce, "activations_mib": main,
                              "cross_entropy_mib": ce})
    print(f"  tp={tp}: {meas:.3f} MiB/step, theory {main:.3f} (activations) + {ce:.3f} (loss statistics) = {main + ce:.3f}")
json.dump(res, open(out, "w"), indent=1)
PY
