#!/usr/bin/env bash
# Packs what tools/gpu_check.sh runs on a GPU machine that has the CUDA toolkit and driver but none of
# our Debian libraries: the test programs and tessera, the CUDA plugin, and every shared library they
# load except CUDA's own (libcudart, libcublas*, libcuda: the GPU machine's), glibc and its loader
# included, so the bundle runs whatever the machine's distribution (through the carried loader).
# Usage: tools/gpu_bundle.sh [BUILD_DIR] [OUT.tar.xz]     (default: build, gpu_bundle.tar.xz)
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-gpu_bundle.tar.xz}
PLUGIN="$BUILD/src/backend/libtessera_cuda.so"
[[ -f $PLUGIN ]] || { echo "error: $PLUGIN missing: build with the CUDA toolkit found (TESSERA_CUDA, docs/cuda.md)" >&2; exit 2; }
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bin" "$STAGE/lib/tessera" "$STAGE/glibc"
cp "$BUILD/src/cli/tessera" "$BUILD/tests/test_backend" "$BUILD/tests/mpi/test_mpi_comm" "$BUILD/bench/bench_train_step" \
  "$STAGE/bin/"
cp "$PLUGIN" "$STAGE/lib/tessera/"
[[ -f $BUILD/src/comm/libtessera_nccl.so ]] && cp "$BUILD/src/comm/libtessera_nccl.so" "$STAGE/lib/tessera/"
# Every library of the binaries and the plugins, but CUDA's and NCCL's (found on the GPU machine,
# matching its driver; NCCL alone is 218 MB).
for f in "$STAGE"/bin/* "$STAGE"/lib/tessera/*.so; do
  ldd "$f" | awk '/=> \// {print $3} $1 ~ /ld-linux/ {print $1}'
done | sort -u | grep -vE 'libcudart|libcublas|libcuda\.so|libnvidia|libnccl' | while read -r lib; do
  # glibc apart: used only through its own loader where the machine's glibc is older than ours.
  if [[ $(basename "$lib") =~ ^(libc|libm|libpthread|libdl|librt|libresolv)\.so|^ld-linux ]]; then
    cp -L "$lib" "$STAGE/glibc/"
  else
    cp -L "$lib" "$STAGE/lib/"
  fi
done
ldd --version | awk 'NR == 1 {print $NF}' >"$STAGE/GLIBC_VERSION"  # awk reads it all: no SIGPIPE under pipefail
# Open MPI's components and help files, for `tessera train` (a singleton MPI_Init still starts orted).
if [[ -d /usr/lib/x86_64-linux-gnu/openmpi ]]; then
  mkdir -p "$STAGE/ompi/bin" "$STAGE/ompi/lib/x86_64-linux-gnu" "$STAGE/ompi/share"
  cp -rL /usr/lib/x86_64-linux-gnu/openmpi "$STAGE/ompi/lib/x86_64-linux-gnu/"
  cp -rL /usr/share/openmpi "$STAGE/ompi/share/" 2>/dev/null || true
  cp -L "$(command -v orted)" "$(command -v mpirun)" "$STAGE/ompi/bin/" 2>/dev/null || true
  for f in "$STAGE"/ompi/bin/* $(find "$STAGE/ompi/lib" -name '*.so'); do ldd "$f" 2>/dev/null || true; done |
    awk '/=> \// {print $3}' | sort -u | grep -vE '/(libc|libm|libpthread|libdl|librt|libresolv)\.so' |
    while read -r lib; do [[ -e $STAGE/lib/$(basename "$lib") ]] || cp -L "$lib" "$STAGE/lib/"; done
fi
git -C "$(dirname "$0")/.." rev-parse --short=10 HEAD >"$STAGE/COMMIT" 2>/dev/null || true
tar -C "$STAGE" -cJf "$OUT" .
echo "gpu bundle: $OUT ($(du -h "$OUT" | cut -f1), $(find "$STAGE" -type f | wc -l) files)"
