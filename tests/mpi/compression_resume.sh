#!/bin/sh
# Resuming under lossy gradient compression continues bitwise: for each method, a job of 12 steps
# against the same job stopped after 6 (--stop-after, with its checkpoint) and resumed; the exported
# weights must be bitwise equal, which needs each replica's error-feedback residual (and PowerSGD's
# warm-start Q) restored from the checkpoint (train/compression_checkpoint.h). A method prefixed
# "ps-" runs as a synchronous parameter server (2 workers + 1 server) with compressed pushes.
#   compression_resume.sh <tessera> <data_dir> <work_dir> [ps-]method[:override,...] ...
set -e
tessera=$1; data=$2; work=$3; shift 3
here=$(dirname "$0")
config=$here/../../tests/configs/tiny.toml
rm -rf "$work"; mkdir -p "$work"
train() {  # train <out> <overrides and flags...>
  out=$1; shift
  # shellcheck disable=SC2086
  ${MPIEXEC:-mpiexec} --allow-run-as-root --oversubscribe -np $np "$tessera" train --config "$config" --quiet \
    data.dir="$data" train.out_dir="$out" train.threads=1 train.steps=12 train.micro_batch=2 \
    train.batch_tokens=512 train.eval_interval=0 train.checkpoint_interval=0 train.timeout_s=30 $layout "$@" \
    >> "$out.log" 2>&1 || { cat "$out.log"; echo "FAIL: $out"; exit 1; }
}
for spec in "$@"; do
  label=${spec%%:*}; overrides=""
  [ "$label" != "$spec" ] && overrides=$(echo "${spec#*:}" | tr ',' ' ')
  method=${label#ps-}; np=2; layout=parallel.dp=2
  [ "$method" != "$label" ] && { np=3; layout="parallel.mode=ps ps.consistency=sync"; }
  # shellcheck disable=SC2086
  train "$work/${label}_whole" comm.compression="$method" $overrides
  # shellcheck disable=SC2086
  train "$work/${label}_split" comm.compression="$method" $overrides --stop-after 6
  # shellcheck disable=SC2086
  train "$work/${label}_split" comm.compression="$method" $overrides --resume
  if grep -q "starts afresh" "$work/${label}_split.log"; then cat "$work/${label}_split.log"; echo "FAIL: $label state not restored"; exit 1; fi
  for run in whole split; do
    "$tessera" export --run "$work/${label}_$run" --out "$work/${label}_$run.safetensors" --force > /dev/null
  done
  /usr/bin/python3 "$here/compare_safetensors.py" --tolerance 0 "$work/${label}_whole.safetensors" \
    "$work/${label}_split.safetensors" || { echo "FAIL: $label: stopped at step 6 and resumed, not bitwise the whole run"; exit 1; }
  echo "PASS: $label resumes bitwise"
done
