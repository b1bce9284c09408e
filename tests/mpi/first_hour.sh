#!/bin/bash
# What a newcomer meets first on many ranks, as written in the README and docs:
#   1. `mpirun -np 4 tessera train --config configs/tiny.toml` trains with dp = 4, no override;
#   2. with its output in a file (a Slurm or CI log), one plain line per logged step: no carriage
#      returns or terminal escapes, `grep` finds every step;
#   3. an error every rank hits (a missing dataset) is printed once, naming all 4 ranks, without
#      Open MPI's MPI_ABORT banner, and the job exits with the data code 5;
#   4. a missing --config and an unknown flag (the same command line on every rank) are printed once
#      with the usage code 2; the missing config names all 4 ranks.
#   first_hour.sh <tessera> <source_dir> <data_dir> <work_dir>
set -euo pipefail
tessera=$(readlink -f "$1"); src=$(readlink -f "$2"); data=$(readlink -f "$3"); work=$4
mpirun="${MPIEXEC:-mpiexec} --allow-run-as-root --oversubscribe"
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work"; mkdir -p "$work"; cd "$work"

# 1 + 2: the shipped tiny config on 4 ranks, 5 steps, output to a file.
$mpirun -np 4 "$tessera" train --config "$src/configs/tiny.toml" data.dir="$data" train.steps=5 train.threads=1 \
  train.eval_interval=0 train.out_dir=dp4 > dp4.log 2>&1 || { cat dp4.log; fail "tiny.toml on 4 ranks"; }
grep -q "x 4 dp)" dp4.log || { cat dp4.log; fail "tiny.toml on 4 ranks did not train with dp = 4"; }
if grep -q $'\r\|\e' dp4.log; then cat -A dp4.log | head; fail "a log file holds carriage returns or escapes"; fi
lines=$(grep -c '^step [1-5]/5 | loss ' dp4.log)
[ "$lines" -eq 5 ] || { cat dp4.log; fail "expected one line per logged step (5), found $lines"; }
echo "PASS: tiny.toml trains with dp = 4; its log file has one plain line per step"

# 3: the same error on every rank, reported once.
rc=0
$mpirun -np 4 "$tessera" train --config "$src/configs/tiny.toml" data.dir="$work/no_such_dataset" \
  train.out_dir=err > err.log 2>&1 || rc=$?
cat err.log
[ "$rc" -eq 5 ] || fail "a missing dataset must end the job with exit code 5, not $rc"
[ "$(grep -c 'error' err.log)" -eq 1 ] || fail "the error is printed more than once"
grep -q '^\[all 4 ranks\] error: fatal: not_found: no dataset manifest' err.log || fail "the report does not name all 4 ranks"
if grep -q 'MPI_ABORT' err.log; then fail "Open MPI's abort banner is back"; fi
echo "PASS: an error every rank hits is printed once (exit code 5)"

# 4: command-line mistakes under mpirun, printed once.
rc=0
$mpirun -np 4 "$tessera" train --config no_such.toml > noconf.log 2>&1 || rc=$?
cat noconf.log
[ "$rc" -eq 2 ] || fail "a missing --config must end the job with exit code 2, not $rc"
[ "$(grep -c 'no config file' noconf.log)" -eq 1 ] || fail "the missing config is printed more than once"
grep -q '^\[all 4 ranks\] error: fatal: not_found: no config file no_such.toml' noconf.log \
  || fail "the missing config's report does not name all 4 ranks"
rc=0
$mpirun -np 4 "$tessera" train --config "$src/configs/tiny.toml" --no-such-flag > flag.log 2>&1 || rc=$?
cat flag.log
[ "$rc" -eq 2 ] || fail "an unknown flag must end the job with exit code 2, not $rc"
[ "$(grep -c 'no-such-flag' flag.log)" -eq 1 ] || fail "the unknown flag is not reported exactly once"
# Rank 0 alone prints it; when rank 0 starts last (a loaded machine), the others must not end the
# job before it has: rank 0 started a second late here.
printf '#!/bin/sh\n[ "$OMPI_COMM_WORLD_RANK" = 0 ] && sleep 1\nexec "$@"\n' > late_rank0.sh
chmod +x late_rank0.sh
rc=0
$mpirun -np 4 ./late_rank0.sh "$tessera" train --config "$src/configs/tiny.toml" --no-such-flag > late.log 2>&1 || rc=$?
[ "$(grep -c 'no-such-flag' late.log)" -eq 1 ] || { cat late.log; fail "the unknown flag is lost when rank 0 starts last"; }
echo "PASS: a missing --config and an unknown flag are printed once (exit code 2)"
