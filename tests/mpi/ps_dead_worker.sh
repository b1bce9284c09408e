#!/bin/sh
# Parameter server, async: worker 1 of 3 stops answering at step 5 (TESSERA_FAULT hang). The server
# must drop it after train.timeout_s / 2 of silence and the other two workers must train to the last
# step (20): the lead's metrics log step 20 and the server's push log answers workers 0 and 2 at step
# 20. The job itself then fails at the final evaluation (a collective the hung worker never joins),
# naming rank 1.   ps_dead_worker.sh <tessera> <data_dir> <work_dir>
tessera=$1; data=$2; work=$3
config=$(dirname "$0")/../../tests/configs/tiny.toml
rm -rf "$work"; mkdir -p "$work"
timeout -k 5 60 ${MPIEXEC:-mpiexec} --allow-run-as-root --oversubscribe -x TESSERA_FAULT=hang:rank=1:step=5 -np 4 \
  "$tessera" train --config "$config" --quiet data.dir="$data" train.out_dir="$work/run" train.threads=1 \
  train.steps=20 train.micro_batch=2 train.batch_tokens=384 train.eval_interval=20 train.eval_batches=1 \
  train.timeout_s=6 parallel.mode=ps parallel.dp=3 ps.consistency=async > "$work/out.txt" 2>&1
rc=$?
cat "$work/out.txt"
fail=0
[ $rc -eq 124 ] || [ $rc -eq 137 ] && { echo "FAIL: the job did not end"; fail=1; }
grep -qF "dropping worker 1 (world rank 1) after its step 4" "$work/out.txt" || { echo "FAIL: worker 1 was not dropped"; fail=1; }
grep -qF "ranks [1] did not arrive" "$work/out.txt" || { echo "FAIL: the final collective did not name rank 1"; fail=1; }
grep -q '"step":20,' "$work/run/metrics.jsonl" || { echo "FAIL: the lead did not reach step 20"; fail=1; }
for w in 0 2; do
  grep -q "\"worker\": $w, \"step\": 20," "$work/run/ps_server0.jsonl" || { echo "FAIL: worker $w was not answered at step 20"; fail=1; }
done
[ $fail -eq 0 ] && echo "PASS: the live workers trained to step 20 without worker 1"
exit $fail
