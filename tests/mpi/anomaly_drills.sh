#!/bin/bash
# Numerics provenance (train.on_anomaly) on 2 ranks of the tiny model, 4 micro-batches per rank:
#   trace     a NaN planted at (rank 1, layer 1, backward, micro-batch 2) and a spike planted at
#             (rank 1, the head, forward, micro-batch 2) -- the loss spikes -- and at (rank 1, layer 1,
#             backward, micro-batch 2) -- the gradient norm spikes -- are each reported with exactly
#             those coordinates under dp 2, tp 2 and pp 2 (and the NaN under zero 3), and stop the run.
#   rollback  the NaN at step 5 with checkpoints every 3 steps: rollback returns to step 3, skips step
#             5's batch and finishes; its final tensors are bitwise those of skip_step (which skips the
#             same update in place) and differ from a run without the fault; the events are in
#             metrics.jsonl and the sample ledger is exactly once.
#   anomaly_drills.sh <tessera> <work_dir> <drill>...
set -euo pipefail
tessera=$1; work=$2; shift 2
here=$(dirname "$0")
source "$here/genesis_drill.sh"
common="data.dir=$work/data train.threads=1 train.micro_batch=1 train.batch_tokens=512 train.eval_interval=0
        train.timeout_s=60"
nan_fault="nan:rank=1:step=5:layer=1:pass=backward:micro_batch=2"

# run <out> <fault> overrides...: 2 ranks; output in <out>.log, exit status in $status
run() {
  local out=$1 fault=$2; shift 2
  set +e
  # shellcheck disable=SC2086
  $mpirun -n 2 -x TESSERA_FAULT="$fault" "$tessera" train --config "$config" --quiet $common train.out_dir="$out" "$@" \
    > "$out.log" 2>&1
  status=$?
  set -e
}
# expect_trace <out> <what> <fault> <reported> overrides...: the run stops naming the origin
expect_trace() {
  local out=$1 what=$2 fault=$3 reported=$4; shift 4
  run "$out" "$fault" "$@"
  [ "$status" -ne 0 ] || { cat "$out.log"; fail "$what: the run went on past the anomaly"; }
  grep -q "$reported" "$out.log" || { cat "$out.log"; fail "$what: not reported as '$reported'"; }
  echo "ok: $what -> $(grep -o "anomaly at step [0-9]*: [a-z -]*first produced on [^(;[]*" "$out.log" | head -1)"
}

for drill in "$@"; do
  echo "== drill $drill"
  case $drill in
  trace)
    spikes="train.spike_loss_factor=1.2 train.spike_grad_factor=5"
    for layout in parallel.dp=2 parallel.tp=2 parallel.pp=2 "parallel.dp=2 parallel.zero=3"; do
      name=${layout//[ .=]/_}
      # shellcheck disable=SC2086
      expect_trace "$work/nan_$name" "NaN under $layout" "$nan_fault" \
        "anomaly at step 5: non-finite value first produced on rank 1, layer 1, backward op mlp_proj, micro-batch 2" \
        train.steps=6 $layout
      if [ "$layout" = "parallel.dp=2 parallel.zero=3" ]; then continue; fi
      # shellcheck disable=SC2086
      expect_trace "$work/loss_spike_$name" "loss spike under $layout" \
        "spike:rank=1:step=8:layer=2:pass=forward:micro_batch=2:op=head:factor=1000" \
        "anomaly at step 8: spike first produced on rank 1, layer 2, forward op head, micro-batch 2 .*(train.spike_loss_factor" \
        train.steps=9 $spikes $layout
      # shellcheck disable=SC2086
      expect_trace "$work/grad_spike_$name" "gradient spike under $layout" \
        "spike:rank=1:step=8:layer=1:pass=backward:micro_batch=2" \
        "anomaly at step 8: spike first produced on rank 1, layer 1, backward op mlp_proj, micro-batch 2 .*(train.spike_grad_factor" \
        train.steps=9 $spikes $layout
    done
    ;;
  rollback)
    steps="train.steps=8 train.checkpoint_interval=3 train.sample_ledger=true parallel.dp=2"
    # shellcheck disable=SC2086
    run "$work/rolled" "$nan_fault" $steps train.on_anomaly=rollback
    [ "$status" -eq 0 ] || { cat "$work/rolled.log"; fail "rollback did not finish the run"; }
    m=$work/rolled/metrics.jsonl
    grep -q '"action":"rollback","event":"anomaly".*"origin":{"layer":1,"micro_batch":2,"op":"mlp_proj","pass":"backward","rank":1},"step":5' "$m" \
      || fail "rollback: no anomaly event with the origin in $m"
    grep -q '"event":"rollback","from_step":5,"step":5,"to_step":3' "$m" || fail "rollback: no rollback event in $m"
    "$tessera" plot --out "$work/rolled.svg" "$work/rolled" > /dev/null || fail "rollback: tessera plot cannot read $m"
    grep -q '"event":"skipped_batch","step":5' "$m" || fail "rollback: the skipped batch is not logged in $m"
    "$tessera" data ledger "$work/rolled" > "$work/rolled.ledger.txt" || { cat "$work/rolled.ledger.txt"; fail "rollback: the ledger is not exactly once"; }
    # shellcheck disable=SC2086
    run "$work/skipped" "$nan_fault" $steps train.on_anomaly=skip_step
    [ "$status" -eq 0 ] || { cat "$work/skipped.log"; fail "skip_step did not finish the run"; }
    # shellcheck disable=SC2086
    run "$work/clean" "" $steps
    [ "$status" -eq 0 ] || { cat "$work/clean.log"; fail "the run without a fault failed"; }
    last=checkpoints/step_00000008
    # exit 1 whenever anything differs: here the run configs do (on_anomaly, out_dir)
    "$tessera" checkpoint diff "$work/rolled/$last" "$work/skipped/$last" > "$work/diff.txt" || true
    grep -q "different: 0 of [0-9]* tensors differ" "$work/diff.txt" \
      || { cat "$work/diff.txt"; fail "rollback and skip_step end on different tensors"; }
    "$tessera" checkpoint diff "$work/rolled/$last" "$work/clean/$last" > "$work/diff_clean.txt" || true
    if grep -q "different: 0 of" "$work/diff_clean.txt"; then fail "the rollback run ends where the run without the fault does: the batch was not skipped"; fi
    echo "ok: rollback to step 3, step 5's batch skipped; final tensors equal skip_step's, ledger exactly once"
    ;;
  *) fail "unknown drill $drill" ;;
  esac
done
echo "all anomaly drills passed"
