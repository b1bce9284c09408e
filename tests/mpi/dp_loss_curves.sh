#!/bin/sh
# Golden-curve test of data parallelism: runs tiny jobs that see the same global batch of 512 tokens
# per step in different layouts and checks that their loss curves agree step by step.
#   dp_loss_curves.sh <tessera> <data_dir> <work_dir> <tolerance> <label>=<np>:<micro_batch> ...
# (seq_len 64, so grad_accum = 512 / (64 * micro_batch * np), as the trainer derives it). Every job runs 20 steps with --verify-replicas (all dp ranks must hold bitwise-identical parameters
# after every step, or the job fails); the first layout is the reference for the others.
set -e
tessera=$1; data=$2; work=$3; tol=$4; shift 4
config=$(dirname "$0")/../../tests/configs/tiny.toml
rm -rf "$work"; mkdir -p "$work"
runs=""
for spec in "$@"; do
  label=${spec%%=*}; rest=${spec#*=}
  np=${rest%%:*}; mb=${rest#*:}; accum=$(( 512 / (64 * mb * np) ))
  echo "== $label: $np rank(s) x micro_batch $mb x grad_accum $accum"
  ${MPIEXEC:-mpiexec} --allow-run-as-root --oversubscribe -np "$np" "$tessera" train --config "$config" --quiet --verify-replicas \
    data.dir="$data" train.out_dir="$work/$label" parallel.dp="$np" train.threads=1 train.steps=20 \
    train.micro_batch="$mb" train.batch_tokens=512 train.eval_interval=0 \
    train.timeout_s=30
  runs="$runs $label=$work/$label/metrics.jsonl"
done
exec /usr/bin/python3 "$(dirname "$0")/dp_compare_losses.py" --steps 20 --tolerance "$tol" $runs
