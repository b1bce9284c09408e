# Checks shared by the parameter-server drills (ps_dead_worker.sh, ps_spare_worker.sh), sourced after
# they define $tessera. A failed check records itself in $fail (no).
fail=0
no() { echo "FAIL: $*"; fail=1; }

# job_ended <work> <exit code>: shows the job's output (<work>/out.txt); the job must have ended by
# itself, not by the test's timeout.
job_ended() {
  cat "$1/out.txt"
  echo "---- exit code $2"
  [ "$2" -eq 124 ] || [ "$2" -eq 137 ] && no "the job did not end"
}

# checkpoint_complete <work> <ranks>: the run's last checkpoint is step 12, saved by <ranks> ranks,
# and every fingerprint matches its pieces.
checkpoint_complete() {
  "$tessera" checkpoint inspect "$1/run" > "$1/inspect.txt" 2>&1 || no "checkpoint inspect failed"
  cat "$1/inspect.txt"
  grep -qF "step 12, saved by $2 ranks" "$1/inspect.txt" || no "the last checkpoint is not step 12 saved by the $2 live ranks"
  "$tessera" checkpoint fingerprint "$1/run" > "$1/fingerprint.txt" 2>&1 ||
    { cat "$1/fingerprint.txt"; no "checkpoint 12's fingerprints do not match"; }
}

# resumed_to_16 <work> <exit code>: the resume on the whole job (its output in <work>/resume.txt)
# started from checkpoint 12 and reached step 16.
resumed_to_16() {
  cat "$1/resume.txt"
  [ "$2" -eq 0 ] || no "the resume on the whole job failed (exit code $2)"
  grep -qF "resuming from $1/run/checkpoints/step_00000012 (step 12)" "$1/resume.txt" || no "the resume did not start from checkpoint 12"
  grep -q '"step":16,' "$1/run/metrics.jsonl" || no "the resumed run did not reach step 16"
}
