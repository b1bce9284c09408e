#!/usr/bin/env bash
# Installs every Debian package that Tessera's build, tests, benchmarks and tools need.
# Safe to re-run: apt-get skips what is already installed. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git
  libdnnl-dev                      # oneDNN sgemm: the CPU matmul
  libopenmpi-dev openmpi-bin       # MPI communicator and launcher
  libgtest-dev libgmock-dev libbenchmark-dev
  libtomlplusplus-dev              # strict TOML run configs
  nlohmann-json3-dev               # manifests, metrics, traces
  libcli11-dev                     # command-line parsing
  libsentencepiece-dev sentencepiece
  libxxhash-dev                    # checksums
  bible-kjv                        # default corpus, no download
  python3 python3-torch python3-numpy python3-matplotlib  # fixtures, benchmarks, plots (never at run time)
  libopenblas0-openmp              # PyTorch's fairest BLAS for the comparison benchmark
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  echo "[install_deps] installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "[install_deps] all packages present"
fi
