#!/bin/sh
# Parameter server with spare workers (docs/fault-tolerance.md, "Spare workers").
# killed: 3 workers, 1 server
# and 2 spares (ps.spare_workers = 2), async, under mpirun --enable-recovery. Worker 1 is SIGKILLed
# at step 3: at the meeting of step 4 the spare at world rank 4 takes its place; that spare is
# SIGKILLed at step 7 and the spare at world rank 5 takes the place at step 8. The servers are never
# restarted: worker 1's pushes after step 4 come from rank 4, after step 8 from rank 5; every
# evaluation runs, the last checkpoint (step 12) is complete on the 4 live ranks with matching
# fingerprints and the data position of 12 full steps, and it resumes on the whole job.
# mpirun --enable-recovery exits 0 whatever the ranks return: the output is checked instead.
# hang: plain mpirun, 1 spare, ssp; worker 1 hangs at step 3 and the spare takes its place at step 4;
# the run is complete at step 8, so the job ends with exit code 0 (the abort takes the hung worker).
#   ps_spare_worker.sh <tessera> <data_dir> <work_dir> killed|hang
tessera=$1; data=$2; work=$3; mode=$4
config=$(dirname "$0")/../../tests/configs/tiny.toml
rm -rf "$work"; mkdir -p "$work"
train() {  # mpirun options, then "--", then trainer arguments
  mpi_opts=""
  while [ "$1" != -- ]; do mpi_opts="$mpi_opts $1"; shift; done
  shift
  timeout -k 5 90 ${MPIEXEC:-mpiexec} --allow-run-as-root --oversubscribe $mpi_opts -np 6 \
    "$tessera" train --config "$config" --quiet data.dir="$data" train.out_dir="$work/run" train.threads=1 \
    train.micro_batch=2 train.batch_tokens=384 train.eval_interval=4 train.eval_batches=1 \
    train.checkpoint_interval=4 train.timeout_s=6 parallel.mode=ps parallel.dp=3 ps.consistency=async \
    ps.spare_workers=2 "$@"
}
. "$(dirname "$0")/ps_drill_checks.sh"
if [ "$mode" = hang ]; then
  timeout -k 5 90 ${MPIEXEC:-mpiexec} --allow-run-as-root --oversubscribe -x TESSERA_FAULT=hang:rank=1:step=3 -np 5 \
    "$tessera" train --config "$config" --quiet data.dir="$data" train.out_dir="$work/run" train.threads=1 \
    train.micro_batch=2 train.batch_tokens=384 train.eval_interval=0 train.checkpoint_interval=4 train.steps=8 \
    train.timeout_s=6 parallel.mode=ps parallel.dp=3 ps.consistency=ssp ps.spare_workers=1 > "$work/out.txt" 2>&1
  rc=$?
  job_ended "$work" $rc
  [ $rc -eq 0 ] || no "exit code $rc, expected 0 (every lost place taken, the run complete)"
  grep -qF "the spare at world rank 4 takes the place of worker 1 (world rank 1, lost) after step 4" "$work/out.txt" ||
    no "the spare did not replace worker 1 at step 4"
  grep -qF "the run finished with every worker" "$work/out.txt" || no "no final report of the replacement"
  grep -q '"worker": 1, "step": 8,.*"world_rank": 4' "$work/run/ps_server0.jsonl" || no "the spare was not answered at step 8"
  [ $fail -eq 0 ] && echo "PASS: the spare took the hung worker 1's place; the job ended with 0"
  exit $fail
fi
train --enable-recovery -x TESSERA_FAULT=crash:rank=1:step=3,crash:rank=4:step=7 -- train.steps=12 > "$work/out.txt" 2>&1
job_ended "$work" $?
grep -qF "the spare at world rank 4 takes the place of worker 1 (world rank 1, lost) after step 4" "$work/out.txt" ||
  no "spare 4 did not replace worker 1 at step 4"
grep -qF "the spare at world rank 5 takes the place of worker 1 (world rank 4, lost) after step 8" "$work/out.txt" ||
  no "spare 5 did not replace the lost spare 4 at step 8"
grep -qF "the run finished with every worker" "$work/out.txt" || no "no final report of the replacements"
# 2 sequences per worker and step, 3 workers: the stream stands at 6 per step.
grep -qF "taking the place of worker 1 after step 4 (its data slice from stream position 24 of epoch 0)" "$work/out.txt" ||
  no "spare 4 does not read worker 1's data from step 4's position"
grep -qF "taking the place of worker 1 after step 8 (its data slice from stream position 48 of epoch 0)" "$work/out.txt" ||
  no "spare 5 does not read worker 1's data from step 8's position"
for s in 4 8 12; do
  grep -q "\"step\":$s,\"val_loss\"" "$work/run/metrics.jsonl" || no "no evaluation at step $s"
done
/usr/bin/python3 - "$work/run/ps_server0.jsonl" <<'PY' || no "worker 1's pushes did not come from the spares"
import json, sys
by_step = {r["step"]: r["world_rank"] for r in map(json.loads, open(sys.argv[1])) if r["worker"] == 1}
want = {1: 1, 2: 1, 5: 4, 6: 4, 9: 5, 10: 5, 11: 5, 12: 5}
assert by_step == want, f"worker 1's answered pushes (step: world rank) {by_step}, expected {want}"
print("worker 1's pushes by step and world rank:", by_step)
PY
checkpoint_complete "$work" 4
grep -qF 'loader={"epoch":0,"index":72}' "$work/inspect.txt" || no "the data position is not that of 12 steps of 3 workers"
train -- train.steps=16 --resume > "$work/resume.txt" 2>&1
resumed_to_16 "$work" $?
[ $fail -eq 0 ] && echo "PASS: two spares took worker 1's place in turn; the servers ran on; checkpoint 12 is complete and resumes"
exit $fail
