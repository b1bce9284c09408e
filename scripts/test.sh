#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (unit, PyTorch parity, multi-rank MPI).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j2 --timeout 300
