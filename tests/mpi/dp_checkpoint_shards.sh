#!/bin/bash
# Every data-parallel rank writes its own part of a checkpoint (shard_<rank>.bin), and the pieces
# load back exactly: a 2-rank run stopped after 4 steps and resumed continues with bitwise the same
# losses as the run done in one go, and a 2-rank checkpoint evaluates in a single process to the
# validation loss the run logged.
#   dp_checkpoint_shards.sh <tessera> <data_dir> <work_dir>
set -euo pipefail
tessera=$1; data=$2; work=$3
config=$(dirname "$0")/../../tests/configs/tiny.toml
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
run() {  # run <out_dir> [flags...]
  local out=$1; shift
  ${MPIEXEC:-mpiexec} --allow-run-as-root --oversubscribe -np 2 "$tessera" train --config "$config" --quiet \
    data.dir="$data" train.out_dir="$out" parallel.dp=2 train.threads=1 train.steps=8 train.micro_batch=2 \
    train.batch_tokens=256 train.eval_interval=4 train.eval_batches=2 train.timeout_s=30 "$@"
}
losses() { /usr/bin/python3 -c 'import json,sys; print([l for l in open(sys.argv[1]) if "\"loss\"" in l and "\"val_loss\"" not in l])' "$1" |
  /usr/bin/python3 -c 'import re,sys; print(re.findall(r"\"loss\":([^,}]+)", sys.stdin.read()))'; }

run "$work/A"
run "$work/B" --stop-after 4
run "$work/B" --resume
for r in A B; do
  for s in 0 1; do
    f=$work/$r/checkpoints/step_00000008/shard_$s.bin
    [[ -s $f ]] || fail "$f missing or empty: rank $s did not write its part"
  done
done
la=$(losses "$work/A/metrics.jsonl"); lb=$(losses "$work/B/metrics.jsonl")
[[ $la == "$lb" ]] || fail "resumed 2-rank run differs from the uninterrupted one: $la vs $lb"
cmp "$work/A/checkpoints/step_00000008/shard_1.bin" "$work/B/checkpoints/step_00000008/shard_1.bin" ||
  fail "rank 1's final shard differs between the resumed and the uninterrupted run"
"$tessera" eval --run "$work/A" --batches 2 --threads 1 >"$work/eval.txt" || fail "eval of a 2-rank checkpoint"
# The same 8 validation sequences (2 batches of 4 here; 2 ranks x 2 batches of 2 in training): the
# single process must print the loss the 2-rank run logged at step 8 (to its 4 printed decimals).
eval_loss=$(sed -n 's/.*: loss \([0-9.]*\) nats\/token.*/\1/p' "$work/eval.txt")
val_loss=$(/usr/bin/python3 -c 'import json,sys
print(next(e["val_loss"] for e in map(json.loads, open(sys.argv[1])) if e.get("step") == 8 and "val_loss" in e))' \
  "$work/A/metrics.jsonl")
/usr/bin/python3 -c 'import sys; sys.exit(abs(float(sys.argv[1]) - float(sys.argv[2])) > 6e-5)' "${eval_loss:-nan}" \
  "$val_loss" || fail "eval of the 2-rank checkpoint: loss ${eval_loss:-missing} != the run's val_loss $val_loss at step 8"
echo "OK: 2 shards per checkpoint, resumed losses identical ($la), single-process eval: $(cat "$work/eval.txt")"
