#!/bin/sh
# Local SGD (DiLoCo: H = 3, outer lr 0.7, Nesterov momentum 0.9) resumes exactly: a 2-replica run
# stopped after step 4 -- in the middle of a round, replicas apart, inner moments per replica -- and
# resumed logs bitwise the same losses as the run done in one go, and ends with the same checkpoint.
#   local_sgd_resume.sh <tessera> <data_dir> <work_dir>
set -e
tessera=$1; data=$2; work=$3
config=$(dirname "$0")/../../tests/configs/tiny.toml
rm -rf "$work"; mkdir -p "$work"
run() {  # run <out_dir> [flags...]
  out=$1; shift
  ${MPIEXEC:-mpiexec} --allow-run-as-root --oversubscribe -np 2 "$tessera" train --config "$config" --quiet \
    --verify-replicas data.dir="$data" train.out_dir="$out" parallel.dp=2 train.threads=1 train.steps=9 \
    train.micro_batch=2 train.batch_tokens=256 train.eval_interval=0 train.timeout_s=30 \
    train.local_steps=3 outer.lr=0.7 outer.momentum=0.9 outer.nesterov=true "$@"
}
run "$work/A"
run "$work/B" --stop-after 4
run "$work/B" --resume
/usr/bin/python3 "$(dirname "$0")/dp_compare_losses.py" --steps 9 --tolerance 0 \
  uninterrupted="$work/A/metrics.jsonl" resumed="$work/B/metrics.jsonl"
for s in 0 1; do
  cmp "$work/A/checkpoints/step_00000009/shard_$s.bin" "$work/B/checkpoints/step_00000009/shard_$s.bin" ||
    { echo "FAIL: rank $s's final shard differs between the resumed and the uninterrupted run"; exit 1; }
done
echo "PASS: the resumed local SGD run continues bitwise as the uninterrupted one"
