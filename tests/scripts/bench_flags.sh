#!/usr/bin/env bash
# Every benchmark program answers --help with its usage (exit 0) and refuses an unknown flag, a flag
# without its value and a value that is not a number (exit 2) before measuring anything; the compute
# benchmarks take --cpu-isa, run at the forced level and refuse a level that does not exist.
# Usage: bench_flags.sh BENCH_BINARY...
set -uo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench_flags.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
[[ $# -gt 0 ]] || fail "no benchmark binaries given"
for bin in "$@"; do
  name=$(basename "$bin")
  "$bin" --help >"$WORK/out" 2>&1 || fail "$name --help exited $?"
  grep -q "^usage: $name" "$WORK/out" || fail "$name --help printed no usage: $(head -3 "$WORK/out")"
  "$bin" --no-such-flag >"$WORK/out" 2>&1
  rc=$?
  [[ $rc == 2 ]] || fail "$name --no-such-flag exited $rc, not 2"
  grep -q "unknown flag --no-such-flag" "$WORK/out" || fail "$name did not name the unknown flag: $(head -2 "$WORK/out")"
  grep -q "^usage: $name" "$WORK/out" || fail "$name printed no usage with its refusal"
  # The last declared option without its value.
  last=$(grep -o '\[--[a-z0-9-]* X\]' "$WORK/out" | tail -1 | tr -d '[]' | cut -d' ' -f1)
  if [[ -n $last ]]; then
    "$bin" "$last" >"$WORK/out" 2>&1
    rc=$?
    [[ $rc == 2 ]] && grep -q -- "$last needs a value" "$WORK/out" || fail "$name $last without a value: exit $rc, $(head -1 "$WORK/out")"
  fi
  if grep -q -- "--cpu-isa" "$WORK/out"; then
    "$bin" --cpu-isa avx9 >"$WORK/out" 2>&1
    rc=$?
    [[ $rc == 2 ]] && grep -q "avx9" "$WORK/out" || fail "$name --cpu-isa avx9: exit $rc, $(head -1 "$WORK/out")"
  fi
  echo "ok: $name"
done
# A number flag given a word, and one compute benchmark run at the forced AVX2 level.
opt=""
for bin in "$@"; do [[ $(basename "$bin") == bench_optimizer_update ]] && opt=$bin; done
[[ -n $opt ]] || fail "bench_optimizer_update not among the binaries"
"$opt" --params many >"$WORK/out" 2>&1
rc=$?
[[ $rc == 2 ]] && grep -q -- "--params: 'many' is not a valid value" "$WORK/out" || fail "--params many: exit $rc, $(head -1 "$WORK/out")"
"$opt" --params 4096 --reps 1 --cpu-isa avx2 >"$WORK/out" 2>&1 || fail "bench_optimizer_update --cpu-isa avx2 exited $?: $(cat "$WORK/out")"
grep -q "^CPU kernels avx2 (forced" "$WORK/out" || fail "bench_optimizer_update did not run at the forced level: $(head -2 "$WORK/out")"
echo "ok: number check and a run at --cpu-isa avx2"
# The benchmark scripts: --help prints the opening comment (exit 0), an option where the build
# directory goes is refused (exit 2), and so is a build directory without the tessera binary.
SCRIPTS=$(cd "$(dirname "$0")/../../bench" && pwd)
for s in "$SCRIPTS"/*.sh; do
  name=$(basename "$s")
  [[ $name == lib.sh || $name == script_args.sh ]] && continue
  bash "$s" --help >"$WORK/out" 2>&1 || fail "$name --help exited $?"
  first=$(sed -n '2s/^# \{0,1\}//p' "$s")
  [[ $(head -1 "$WORK/out") == "$first" ]] || fail "$name --help did not print its opening comment: $(head -1 "$WORK/out")"
  bash "$s" --no-such-option >"$WORK/out" 2>&1
  rc=$?
  [[ $rc == 2 ]] && grep -q -- "unknown option '--no-such-option'" "$WORK/out" || fail "$name --no-such-option: exit $rc, $(head -1 "$WORK/out")"
  [[ $name == compare_with_commit.sh ]] && continue  # its first argument is a commit
  bash "$s" "$WORK/no-build" >"$WORK/out" 2>&1
  rc=$?
  [[ $rc == 2 ]] && grep -q "no tessera binary" "$WORK/out" || fail "$name with a missing build directory: exit $rc, $(head -1 "$WORK/out")"
done
echo "ok: the benchmark scripts' --help and refusals"
