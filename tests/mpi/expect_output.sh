#!/bin/sh
# Runs a command (an mpiexec job) under a deadline and checks how it ended:
#   expect_output.sh <max_seconds> <zero|nonzero> <expected text>... -- <command>...
# Passes when the job ends within max_seconds, its exit code is as expected, and every expected
# text (fixed string) appears in its combined output.
max_s=$1; want_rc=$2; shift 2
patterns_file=$(mktemp); out=$(mktemp)
trap 'rm -f "$patterns_file" "$out"' EXIT
while [ $# -gt 0 ] && [ "$1" != "--" ]; do printf '%s\n' "$1" >> "$patterns_file"; shift; done
[ "$1" = "--" ] && shift
start=$(date +%s)
timeout -k 5 "$max_s" "$@" > "$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
echo "---- exit code $rc after ${elapsed} s"
fail=0
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "FAIL: the job did not end within ${max_s} s"; fail=1; fi
if [ "$want_rc" = nonzero ] && [ $rc -eq 0 ]; then echo "FAIL: expected a non-zero exit code"; fail=1; fi
if [ "$want_rc" = zero ] && [ $rc -ne 0 ]; then echo "FAIL: expected exit code 0"; fail=1; fi
while IFS= read -r p; do
  if ! grep -qF -- "$p" "$out"; then echo "FAIL: missing expected output: $p"; fail=1; fi
done < "$patterns_file"
[ $fail -eq 0 ] && echo "PASS"
exit $fail
