#!/bin/sh
# Golden-curve test of model parallelism: one model trained 20 steps on a single process (the
# reference) and in each given layout must log the same loss curve and the same pre-clip gradient
# norms (relative difference per step). Every job sees the same global batch of 512 tokens (micro_batch 2 x seq_len 64 x grad_accum
# 4 on one process; dp ranks split it, pipeline stages use the accumulation steps as micro-batches).
#   mp_loss_curves.sh <tessera> <data_dir> <work_dir> <tolerances> "<model overrides>" <label>=<np>:<overrides> ...
# <tolerances>: one number for all, or loss=A,grad_norm=B,weights=C (an omitted one takes loss's;
# grad_norm=off skips the norms; grad_norm_from=<label>: that layout and the ones after it compare
# their norms with that layout's, e.g. local SGD's per-replica norm with local SGD's).
# <overrides> are key=value pairs for `tessera train` joined by '+', e.g. parallel.tp=2+parallel.pp=2.
# A layout job also checks that its dp replicas stay bitwise identical (--verify-replicas), and its
# final checkpoint must export (tessera export: unsharded tensors, Hugging Face names) the same
# safetensors as the reference's, every tensor within the weights tolerance of its largest magnitude.
# A MoE model must also log the same expert load per step (moe_load_compare.py).
# A label ending in "_resumed" stops after 10 steps and continues with --resume (same curve expected).
# An override from=<label> (of an earlier "_resumed" job) re-shards instead: this job starts from that
# job's step-10 checkpoint and metrics and trains steps 11-20 in its own layout (any dp/tp/pp/zero).
# Validation (steps 10 and 20) covers the same 4 windows in every job: 2 batches of 2 on one dp
# rank, so a layout with parallel.dp=2 must pass train.eval_batches=1 (each rank evaluates its slice).
set -e
tessera=$1; data=$2; work=$3; tolerances=$4; model=$5; shift 5
tolerance() {  # tolerance <name>: its value in $tolerances, else loss's, else the plain number
  v=$(echo "$tolerances" | tr ',' '\n' | sed -n "s/^$1=//p")
  [ -n "$v" ] || v=$(echo "$tolerances" | tr ',' '\n' | sed -n "s/^loss=//p")
  [ -n "$v" ] || v=$tolerances
  echo "$v"
}
loss_tol=$(tolerance loss); grad_tol=$(tolerance grad_norm); weights_tol=$(tolerance weights)
grad_from=$(echo "$tolerances" | tr ',' '\n' | sed -n "s/^grad_norm_from=//p")
config=$(dirname "$0")/../../tests/configs/tiny.toml
rm -rf "$work"; mkdir -p "$work"
train() {  # label np [--stop-after N | --resume] overrides...
  label=$1; np=$2; shift 2
  ${MPIEXEC:-mpiexec} --allow-run-as-root --oversubscribe -np "$np" "$tessera" train --config "$config" --quiet \
    --verify-replicas data.dir="$data" train.out_dir="$work/$label" train.threads=1 train.steps=20 \
    train.micro_batch=2 train.batch_tokens=512 train.eval_interval=10 train.eval_batches=2 train.timeout_s=60 \
    $model "$@"
}
run() {  # label np overrides...
  echo "== $1: $2 rank(s): $(echo "$@" | cut -d' ' -f3-)"
  from=$(echo "$@" | tr ' ' '\n' | sed -n 's/^from=//p')
  if [ -n "$from" ]; then
    l=$1 n=$2; shift 2
    mkdir -p "$work/$l/checkpoints"
    cp -r "$work/$from/checkpoints/step_00000010" "$work/$l/checkpoints/"
    /usr/bin/python3 -c 'import json,sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("step", 0) <= 10 and "event" not in e: print(line, end="")' "$work/$from/metrics.jsonl" > "$work/$l/metrics.jsonl"
    # shellcheck disable=SC2046  # the overrides are separate words
    train "$l" "$n" --resume $(echo "$@" | tr ' ' '\n' | grep -v '^from=')
    return
  fi
  case $1 in
    *_resumed) train "$@" --stop-after 10 && l=$1 n=$2 && shift 2 && train "$l" "$n" --resume "$@" ;;
    *) train "$@" ;;
  esac
}
run reference 1 parallel.dp=1
runs="reference=$work/reference/metrics.jsonl"
for spec in "$@"; do
  label=${spec%%=*}; rest=${spec#*=}
  np=${rest%%:*}; overrides=$(echo "${rest#*:}" | tr '+' ' ')
  # shellcheck disable=SC2086  # the overrides are separate words
  run "$label" "$np" $overrides
  runs="$runs $label=$work/$label/metrics.jsonl"
done
/usr/bin/python3 "$(dirname "$0")/dp_compare_losses.py" --steps 20 --tolerance "$loss_tol" \
  --grad-norm-tolerance "$grad_tol" ${grad_from:+--grad-norm-reference "$grad_from"} --val $runs
# A mixture-of-experts model: the same expert load (tokens per expert, dropped) in every layout.
/usr/bin/python3 "$(dirname "$0")/moe_load_compare.py" $runs
"$tessera" export --run "$work/reference" --out "$work/reference.safetensors" >/dev/null
for spec in "$@"; do
  label=${spec%%=*}
  "$tessera" export --run "$work/$label" --out "$work/$label.safetensors" >/dev/null
  /usr/bin/python3 "$(dirname "$0")/compare_safetensors.py" --tolerance "$weights_tol" "$work/reference.safetensors" \
    "$work/$label.safetensors"
done
echo "PASS: every layout's loss curve, validation loss and exported weights match the single process"
