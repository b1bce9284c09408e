#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (unit, PyTorch parity, multi-rank MPI).
# Usage: scripts/test.sh [ctest arguments ...]   (e.g. -R 'SgemmPadded' to run only the tests it matches)
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; fi
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Two tests run at once on the same cores: OpenMP threads waiting at a barrier sleep instead of
# spinning (two 2-thread tests side by side took 80 s instead of 0.5 s spinning), and MPI ranks
# waiting in a call yield the core instead of busy-polling it.
export OMP_WAIT_POLICY=PASSIVE OMPI_MCA_mpi_yield_when_idle=1
# Most of a small test's time was start-up: runs take their step-time prediction from the shipped file
# for this machine kind instead of measuring at start (0.3-1 s a launch; tests/cli/plan_time.sh covers
# the measurement), and Open MPI is told the transport it picks here anyway (ob1: shared memory, TCP)
# instead of probing the others first (~0.2 s a launch).
export TESSERA_HARDWARE="$PWD/configs/hardware/cpu-2core.toml" OMPI_MCA_pml=ob1
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j2 --timeout 300 "$@"
