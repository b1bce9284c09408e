# `tessera launch` end to end with a fake job (tests/launch/fake_mpirun.sh as "mpirun" running
# tests/launch/fake_rank.sh, which writes heartbeats like the trainer): a rank killed at step 3 is
# reported with rank, host, step and signal, the job is restarted and finishes, the restart log says
# so; SIGTERM preempts the job (exit 75) and the same command resumes it; a second SIGINT ends it at
# once; and bad invocations fail with clear errors. Usage: launch_fake_job.sh TESSERA SOURCE_DIR
source "$(dirname "$0")/lib.sh"

mkdir bin
ln -s "$SRC/tests/launch/fake_mpirun.sh" bin/mpirun
FAST=(--heartbeat-timeout 5 --grace 1 --poll-interval 0.05)

rc=0
TESSERA_FAULT=crash:rank=1:step=3 "$TESSERA" launch "${FAST[@]}" --run-dir run -- \
  "$WORK/bin/mpirun" -n 3 bash "$SRC/tests/launch/fake_rank.sh" "$WORK/run" 5 > out.log 2>&1 || rc=$?
cat out.log
[[ $rc -eq 0 ]] || fail "launch exited $rc after a crash it should have survived"
grep -qE "rank 1 on host .* died \(signal 9, SIGKILL\) at step 3 \(last completed step 2\)" out.log ||
  fail "the crash report does not name rank 1, its host, step and signal"
grep -q "done: the job finished on attempt 1" out.log || fail "no success line for attempt 1"
[[ $(wc -l < run/launch/restarts.jsonl) -eq 2 ]] || fail "restarts.jsonl should hold 2 attempts"
python3 - run/launch/restarts.jsonl <<'PY' || fail "restarts.jsonl content"
import json, sys
a, b = [json.loads(l) for l in open(sys.argv[1])]
assert a["outcome"] == "failed" and a["failure"]["rank"] == 1 and a["failure"]["signal"] == 9, a
assert a["failure"]["step"] == 2 and a["ranks"] == 3 and a["will_restart"], a
assert b["outcome"] == "done" and b["last_step"] == 5 and b["recovery_s"] > 0, b
PY
echo "ok: crash at step 3 reported, restarted and finished"

# SIGTERM to the launcher: passed on to the job (SIGUSR1 to "mpirun"), whose ranks stop with a
# checkpoint and exit 75; the launcher logs "preempted", does not restart, and exits 75. The same
# command again resumes from that checkpoint and finishes.
"$TESSERA" launch "${FAST[@]}" --run-dir run3 -- \
  "$WORK/bin/mpirun" -n 2 bash "$SRC/tests/launch/fake_rank.sh" "$WORK/run3" 40 > pre.log 2>&1 &
launcher=$!
until grep -qs '"step": [3-9]' run3/launch/heartbeats/rank_0.json; do sleep 0.05; done
kill -TERM "$launcher"
rc=0
wait "$launcher" || rc=$?
cat pre.log
[[ $rc -eq 75 ]] || fail "a preempted launch exited $rc, not 75"
grep -qE "preempted at step [0-9]+; checkpoint $WORK/run3/ckpt saved; run the same command again to resume" pre.log ||
  fail "no preemption line"
grep -q '"outcome":"preempted"' run3/launch/restarts.jsonl || fail "the preemption is not logged"
! grep -q '"will_restart":true' run3/launch/restarts.jsonl || fail "a preempted job was to be restarted"
"$TESSERA" launch "${FAST[@]}" --run-dir run3 -- \
  "$WORK/bin/mpirun" -n 2 bash "$SRC/tests/launch/fake_rank.sh" "$WORK/run3" 40 > pre2.log 2>&1 || fail "relaunch"
grep -q "done: the job finished on attempt 0" pre2.log || { cat pre2.log; fail "the relaunch did not finish"; }
echo "ok: SIGTERM preempts (75), the same command resumes"

# Ctrl-C (SIGINT) twice to the launcher ends the job at once (rank 0 hangs, so it cannot stop
# cleanly), leaves no rank behind and exits 130.
TESSERA_FAULT=hang:rank=0:step=2 "$TESSERA" launch --heartbeat-timeout 60 --grace 1 --run-dir run2 -- \
  "$WORK/bin/mpirun" -n 2 bash "$SRC/tests/launch/fake_rank.sh" "$WORK/run2" 5 > int.log 2>&1 &
launcher=$!
sleep 1.5
kill -INT "$launcher"
sleep 0.5
kill -INT "$launcher"
rc=0
wait "$launcher" || rc=$?
cat int.log
[[ $rc -eq 130 ]] || fail "an interrupted launcher exited $rc, not 130"
grep -q "ending the job now" int.log || fail "the second SIGINT was not reported"
sleep 0.3
! pgrep -f "fake_rank.sh $WORK/run2" > /dev/null || fail "ranks outlived the interrupted launcher"
grep -q '"outcome":"interrupted"' run2/launch/restarts.jsonl || fail "the interruption is not logged"
echo "ok: a second SIGINT ends the job"

expect_error "no command" "no job command|after '--'" -- "$TESSERA" launch --max-restarts 1
echo 1 > slots
expect_error "too few slots" "only 1 slot(s)|--min-ranks 2" -- \
  "$TESSERA" launch --slots-file slots --min-ranks 2 -- "$WORK/bin/mpirun" -n 2 true
expect_error "slots for a plain command" "--slots-file" -- "$TESSERA" launch --slots-file slots -- true
expect_error "max below min" "--max-ranks 2" -- "$TESSERA" launch --min-ranks 3 --max-ranks 2 -- "$WORK/bin/mpirun" true
echo "all launch checks passed"
