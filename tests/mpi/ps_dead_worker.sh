#!/bin/sh
# Parameter server, a lost worker (docs/fault-tolerance.md, "A lost parameter-server worker"): worker 1
# of 3 stops at step 5. The server drops it after train.timeout_s / 2 of silence and keeps serving;
# at the next step where the workers meet (the checkpoint of step 8) the live ranks go on without it:
# checkpoint 8, the evaluation and the checkpoint of the last step (12) run on the 3 survivors, the
# job ends on purpose (exit code 6, naming the lost rank), and checkpoint 12 is complete
# (fingerprints) and resumes on the whole job (4 ranks) to step 16.
#   ps_dead_worker.sh <tessera> <data_dir> <work_dir> hang|killed
# hang:   TESSERA_FAULT=hang (the process stays; plain mpirun), ps.consistency=async
# killed: TESSERA_FAULT=crash (SIGKILL), under mpirun --enable-recovery (plain mpirun would end the
#         job), ps.consistency=ssp. mpirun --enable-recovery exits 0 whatever the ranks return: the
#         output is checked instead of the exit code.
tessera=$1; data=$2; work=$3; mode=$4
config=$(dirname "$0")/../../tests/configs/tiny.toml
case $mode in
  hang) fault=hang:rank=1:step=5; mpi_opt=""; consistency=async ;;
  killed) fault=crash:rank=1:step=5; mpi_opt=--enable-recovery; consistency=ssp ;;
  *) echo "usage: ps_dead_worker.sh <tessera> <data_dir> <work_dir> hang|killed"; exit 2 ;;
esac
rm -rf "$work"; mkdir -p "$work"
timeout -k 5 90 ${MPIEXEC:-mpiexec} --allow-run-as-root --oversubscribe $mpi_opt -x TESSERA_FAULT=$fault -np 4 \
  "$tessera" train --config "$config" --quiet data.dir="$data" train.out_dir="$work/run" train.threads=1 \
  train.steps=12 train.micro_batch=2 train.batch_tokens=384 train.eval_interval=12 train.eval_batches=1 \
  train.checkpoint_interval=4 train.timeout_s=6 parallel.mode=ps parallel.dp=3 ps.consistency=$consistency \
  > "$work/out.txt" 2>&1
rc=$?
. "$(dirname "$0")/ps_drill_checks.sh"
job_ended "$work" $rc
[ "$mode" = hang ] && [ $rc -ne 6 ] && no "exit code $rc, expected 6 (communication: a rank was lost)"
grep -qF "dropping worker 1 (world rank 1) after its step 4" "$work/out.txt" || no "worker 1 was not dropped"
grep -qF "lost worker(s) at world rank 1 after step 8" "$work/out.txt" || no "the survivors did not go on without worker 1 at step 8"
grep -qF "the run finished without the parameter-server worker(s) at world rank 1" "$work/out.txt" || no "no final report naming rank 1"
grep -q '"step":12,"val_loss"' "$work/run/metrics.jsonl" || no "no evaluation at step 12"
for w in 0 2; do
  grep -q "\"worker\": $w, \"step\": 12," "$work/run/ps_server0.jsonl" || no "worker $w was not answered at step 12"
done
checkpoint_complete "$work" 3
timeout -k 5 90 ${MPIEXEC:-mpiexec} --allow-run-as-root --oversubscribe -np 4 \
  "$tessera" train --config "$config" --quiet data.dir="$data" train.out_dir="$work/run" train.threads=1 \
  train.steps=16 train.micro_batch=2 train.batch_tokens=384 train.eval_interval=12 train.eval_batches=1 \
  train.checkpoint_interval=4 train.timeout_s=6 parallel.mode=ps parallel.dp=3 ps.consistency=$consistency --resume \
  > "$work/resume.txt" 2>&1
resumed_to_16 "$work" $?
[ $fail -eq 0 ] && echo "PASS: the servers and the live workers finished without worker 1; checkpoint 12 is complete and resumes"
exit $fail
