#!/bin/sh
# Gradient compression through the real trainer: tiny 20-step jobs on <np> ranks with the same
# global batch, one per comm.compression method, each with --verify-replicas (every dp rank must
# hold bitwise-identical parameters after every step, or the job fails). Checks:
#   - "none" (given explicitly) reproduces the job without a [comm] key bitwise;
#   - every method trains: its loss drop over the 20 steps is at least half of none's;
#     (a loss curve cannot show missing error feedback; test_compressed_exchange.cpp does);
#   - every method sends less: the done line's data-parallel traffic (ring model) is at most
#     none's / its minimum ratio (bf16 1.8, others 3; env MIN_RATIO overrides: ZeRO's bf16 halves only
#     the gradient reduce-scatter, not the parameter all-gather).
#   dp_compression.sh <tessera> <data_dir> <work_dir> <np> "<layout overrides>" method[:override,...] ...
# e.g. dp_compression.sh tessera data/kjv runs 2 parallel.dp=2 bf16 topk:comm.topk_ratio=0.1 powersgd onebit
set -e
tessera=$1; data=$2; work=$3; np=$4; extra=$5; shift 5
config=$(dirname "$0")/../../tests/configs/tiny.toml
rm -rf "$work"; mkdir -p "$work"
run() {  # run <label> <overrides...>
  label=$1; shift
  # shellcheck disable=SC2086  # $extra is a list of overrides
  ${MPIEXEC:-mpiexec} --allow-run-as-root --oversubscribe -np "$np" "$tessera" train --config "$config" --verify-replicas \
    data.dir="$data" train.out_dir="$work/$label" train.threads=1 train.steps=20 train.micro_batch=2 \
    train.batch_tokens=512 train.eval_interval=0 train.timeout_s=30 $extra "$@" \
    > "$work/$label.log" || { cat "$work/$label.log"; echo "FAIL: $label job failed"; exit 1; }
  grep '^done:' "$work/$label.log"
}
run default
run none comm.compression=none
specs=""
for spec in "$@"; do
  method=${spec%%:*}; overrides=""
  [ "$method" != "$spec" ] && overrides=$(echo "${spec#*:}" | tr ',' ' ')
  # shellcheck disable=SC2086
  run "$method" comm.compression="$method" $overrides
  specs="$specs $method"
done
exec /usr/bin/python3 - "$work" "${MIN_RATIO:-0}" $specs <<'PY'
import json, re, sys
work, min_ratio, methods = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
def losses(label):
    with open(f"{work}/{label}/metrics.jsonl") as f:
        return {e["step"]: e["loss"] for e in map(json.loads, f) if "loss" in e and "step" in e}
def traffic(label):
    with open(f"{work}/{label}.log") as f:
        return float(re.search(r"data-parallel traffic ([0-9.]+) MiB/step", f.read()).group(1))
fail = False
ref, none = losses("default"), losses("none")
if ref != none or len(ref) != 20:
    print("FAIL: comm.compression = none changed the loss curve (or a step is missing)"); fail = True
def drop(curve):
    return curve[1] - sum(curve[s] for s in (18, 19, 20)) / 3
base_drop, base_traffic = drop(none), traffic("none")
print(f"none: loss {none[1]:.4f} -> {none[20]:.4f}, dp traffic {base_traffic:.3f} MiB/step")
for m in methods:
    c, t = losses(m), traffic(m)
    need = min_ratio or (1.8 if m == "bf16" else 3.0)
    print(f"{m}: loss {c[1]:.4f} -> {c[20]:.4f} (drop {drop(c):.3f} vs none {base_drop:.3f}), "
          f"dp traffic {t:.3f} MiB/step, ratio {base_traffic / t:.1f}x (need >= {need})")
    if not drop(c) >= 0.5 * base_drop:
        print(f"FAIL: {m} does not train: loss drop {drop(c):.3f} < half of none's {base_drop:.3f}"); fail = True
    if not base_traffic / t >= need:
        print(f"FAIL: {m} sends {t:.3f} MiB/step, not {need}x less than none's {base_traffic:.3f}"); fail = True
sys.exit(1 if fail else 0)
PY
