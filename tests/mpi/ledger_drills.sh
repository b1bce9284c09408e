#!/bin/bash
# The exactly-once sample ledger (train.sample_ledger, `tessera data ledger`) through real restarts,
# on a small dataset (Genesis 1-4, ~210 windows of 64 tokens: an epoch is ~18 steps of 12 sequences):
#   reshape     4 ranks stop at step 5; 3 ranks resume and stop at 9; the newest checkpoint (9) is
#               damaged, so 4 ranks resume from 8 (step 9 is redone) and run past the end of the epoch.
#               The ledger must show every sample of the epoch once, in the stream's order (step 9's
#               first use voided), the same samples as the uninterrupted 4-rank run; a planted
#               duplicate, gap and misplaced sample are each named.
#   elastic16   16 ranks under `tessera launch` with a slots file; once step 2 is logged a slot goes
#               away and a random rank crashes at a random step: the job shrinks to 15 and finishes;
#               the ledger is exactly once.
#   ledger_drills.sh <tessera> <work_dir> <drill>...
set -euo pipefail
tessera=$1; work=$2; shift 2
here=$(dirname "$0")
source "$here/genesis_drill.sh"
common="data.dir=$work/data train.threads=1 train.micro_batch=1 train.eval_interval=0 train.timeout_s=60
        train.sample_ledger=true parallel.dp=0 train.keep_checkpoints=20"
train() {  # np out_dir overrides...: a job that must succeed
  local np=$1 out=$2; shift 2
  # shellcheck disable=SC2086
  $mpirun -n "$np" "$tessera" train --config "$config" --quiet $common train.out_dir="$out" "$@" >> "$out.log" 2>&1 \
    || { cat "$out.log"; fail "training $out on $np ranks"; }
}
ledger_ok() {  # run_dir: `tessera data ledger` passes; prints its report
  "$tessera" data ledger "$1" | tee "$1.ledger.txt" || fail "the ledger of $1 is not exactly once"
}
used() {  # run_dir -> the (epoch, position, window) triples used, after voiding, sorted (via --json counts and the files)
  /usr/bin/python3 - "$1" <<'PY'
import json, os, sys
d = sys.argv[1] + "/ledger"
runs = [json.loads(l) for l in open(d + "/runs.jsonl")]
order = {r["run"]: i for i, r in enumerate(runs)}
cut = [min([r["resumed_from"] for r in runs[i + 1:]], default=10**18) for i in range(len(runs))]
out = set()
for f in os.listdir(d):
    if f.startswith("dp"):
        for l in open(os.path.join(d, f)):
            e = json.loads(l)
            if e["step"] <= cut[order[e["run"]]]:
                out.update(tuple(s) for s in e["samples"])
print(len(out), hash(tuple(sorted(out))))
PY
}

for drill in "$@"; do
  echo "== drill $drill"
  case $drill in
  reshape)
    steps=22  # past the end of the first epoch
    train 4 "$work/whole" train.steps=$steps train.batch_tokens=768
    ledger_ok "$work/whole"
    out=$work/reshaped
    train 4 "$out" train.steps=$steps train.batch_tokens=768 train.checkpoint_interval=2 --stop-after 5
    train 3 "$out" train.steps=$steps train.batch_tokens=768 train.checkpoint_interval=2 --resume --stop-after 4
    [ -f "$out/checkpoints/step_00000009/COMPLETE" ] || fail "no checkpoint of step 9"
    truncate -s 100 "$out/checkpoints/step_00000009/shard_0.bin"  # damaged: --resume falls back to step 8
    train 4 "$out" train.steps=$steps train.batch_tokens=768 train.checkpoint_interval=2 --resume
    grep -q "resuming from .*step_00000008 (step 8)" "$out.log" || { cat "$out.log"; fail "the run did not fall back to step 8"; }
    ledger_ok "$out"
    grep -q "1 complete" "$out.ledger.txt" || fail "the first epoch is not complete in the ledger"
    grep -q " [1-9][0-9]* voided" "$out.ledger.txt" || fail "step 9's first use was not voided"
    [ "$(used "$work/whole")" = "$(used "$out")" ] || fail "4 -> 3 -> 4 ranks used other samples than the uninterrupted run"
    echo "4 -> 3 -> 4 ranks with a fall-back: the same samples as the uninterrupted run, each once"
    # Planted: a line recorded twice, then a line lost: each is named.
    cp -r "$out" "$work/dup"
    head -1 "$work/dup/ledger/dp1.jsonl" >> "$work/dup/ledger/dp1.jsonl"
    if "$tessera" data ledger "$work/dup" > "$work/dup.txt"; then cat "$work/dup.txt"; fail "a duplicate passed"; fi
    grep -q "seen 2 times" "$work/dup.txt" || { cat "$work/dup.txt"; fail "the duplicate is not named"; }
    cp -r "$out" "$work/gap"
    sed -i '3d' "$work/gap/ledger/dp2.jsonl"
    if "$tessera" data ledger "$work/gap" > "$work/gap.txt"; then cat "$work/gap.txt"; fail "a gap passed"; fi
    grep -q "never seen" "$work/gap.txt" || { cat "$work/gap.txt"; fail "the gap is not named"; }
    cp -r "$out" "$work/order"  # a sample in another place than the stream's
    /usr/bin/python3 - "$work/order/ledger/dp0.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
lines[0]["samples"][0][2] += 1
open(sys.argv[1], "w").write("".join(json.dumps(l) + "\n" for l in lines))
PY
    if "$tessera" data ledger "$work/order" > "$work/order.txt"; then cat "$work/order.txt"; fail "a misplaced sample passed"; fi
    grep -q "where the stream has" "$work/order.txt" || { cat "$work/order.txt"; fail "the misplaced sample is not named"; }
    ;;
  elastic16)
    out=$work/elastic16
    echo 16 > "$work/slots"
    rank=$((RANDOM % 16)); at=$((3 + RANDOM % 3))
    (  # one slot goes away once the job is under way
      while ! grep -qs '"step":[2-9]' "$out"/launch/heartbeats/rank_0.json 2>/dev/null; do sleep 0.2; done
      echo 15 > "$work/slots"
    ) &
    # 16 x 15 sequences per step: dp 16 accumulates 15 micro-batches, dp 15 16.
    # shellcheck disable=SC2086
    TESSERA_FAULT=crash:rank=$rank:step=$at "$tessera" launch --max-restarts 2 --grace 2 --run-dir "$out" \
      --heartbeat-timeout 120 --slots-file "$work/slots" --heartbeat-dir "$out/launch/heartbeats" -- \
      $mpirun -n 16 "$tessera" train --config "$config" --quiet $common train.out_dir="$out" train.steps=8 \
      train.batch_tokens=15360 train.checkpoint_interval=1 > "$out.log" 2>&1 || { cat "$out.log"; fail "tessera launch"; }
    wait
    /usr/bin/python3 -c 'import json, sys
ranks = [json.loads(l)["ranks"] for l in open(sys.argv[1])]
print("ranks per attempt:", ranks)
sys.exit(0 if ranks[0] == 16 and ranks[-1] == 15 else 1)' "$out/launch/restarts.jsonl" || fail "the job did not go from 16 ranks to 15"
    ledger_ok "$out"
    grep -q "[1-9] complete" "$out.ledger.txt" || fail "no complete epoch in the ledger"
    echo "rank $rank crashed at step $at: the job went from 16 ranks to 15, every sample once"
    ;;
  *) fail "unknown drill $drill" ;;
  esac
  echo "PASS: $drill"
done
