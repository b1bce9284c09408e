#!/usr/bin/env bash
# Checks that the .deb built from a build tree installs on a fresh Debian 12 (bookworm) and works as
# docs/usage.md ("Installing") says: the package's Depends must pull in everything the single-process
# commands need (training included: Open MPI's one-process start needs openmpi-bin's orted), the shipped
# configs must be found from any directory, and a 2-rank mpirun job must train.
#
# NOT run in CI: it needs root (debootstrap, chroot, mounts) and the network (deb.debian.org).
#
# Usage: sudo bash tools/check_deb_fresh.sh BUILD_DIR CHROOT_DIR [--reuse] [--mirror URL]
#   BUILD_DIR   a configured, fully built tree (e.g. build/). The package is made with the documented
#               `cpack --config BUILD_DIR/CPackConfig.cmake -G DEB -B PKG_DIR`; note that cpack runs the
#               tree's `preinstall` target first, which builds whatever is out of date.
#   CHROOT_DIR  where the fresh system is made: `debootstrap --variant=minbase bookworm CHROOT_DIR`.
#               An existing CHROOT_DIR is deleted and remade, but only if this script made it (it holds
#               .tessera-check-deb-fresh); anything else there is refused.
#   --reuse     keep an existing CHROOT_DIR made by this script (faster re-runs; then it is not fresh:
#               packages of the earlier run stay installed). Never use it for the acceptance check.
#   --mirror    Debian mirror (default http://deb.debian.org/debian)
# Prints PASS/FAIL per check (and INFO lines) and a summary; exit 0 only when every check passes.
# Environment: PKG_DIR (default: a new directory under /tmp) for the package.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
[[ $# -ge 2 ]] || usage
BUILD_DIR=$(realpath "$1"); CHROOT=$(realpath -m "$2"); shift 2
REUSE=0; MIRROR=http://deb.debian.org/debian
while [[ $# -gt 0 ]]; do
  case "$1" in
    --reuse) REUSE=1 ;;
    --mirror) MIRROR=$2; shift ;;
    *) usage ;;
  esac
  shift
done
[[ $(id -u) -eq 0 ]] || { echo "error: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
[[ -f "$BUILD_DIR/CPackConfig.cmake" ]] || { echo "error: $BUILD_DIR/CPackConfig.cmake not found: configure and build first" >&2; exit 2; }
[[ "$CHROOT" != / ]] || { echo "error: refusing CHROOT_DIR /" >&2; exit 2; }
MARKER=.tessera-check-deb-fresh
PKG_DIR=${PKG_DIR:-$(mktemp -d /tmp/tessera-deb-fresh.XXXXXX)}

pass=0; fail=0
PASS() { echo "PASS: $*"; pass=$((pass + 1)); }
FAIL() { echo "FAIL: $*"; fail=$((fail + 1)); }
INFO() { echo "INFO: $*"; }
LOG=$PKG_DIR/log; mkdir -p "$LOG"
# check NAME CMD...: runs CMD with its output in $LOG/NAME.log; PASS or FAIL (with the log's tail).
check() {
  local name=$1; shift
  local rc=0
  "$@" >"$LOG/$name.log" 2>&1 || rc=$?
  if [[ $rc -eq 0 ]]; then PASS "$name"; return 0; fi
  FAIL "$name (exit $rc): $*"
  tail -n 15 "$LOG/$name.log" | sed 's/^/    | /'
  return 1
}
# in_chroot 'shell commands': a login-like clean environment inside the fresh system, in /root/work.
in_chroot() {
  chroot "$CHROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -euo pipefail -c "mkdir -p /root/work && cd /root/work && $1"
}

MOUNTS=()
cleanup() {
  local i
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do umount "${MOUNTS[i]}" 2>/dev/null || umount -l "${MOUNTS[i]}" || true; done
  MOUNTS=()
}
trap cleanup EXIT
mount_in() {  # mount_in TYPE TARGET
  mkdir -p "$CHROOT$2"
  mountpoint -q "$CHROOT$2" || { mount -t "$1" "$1" "$CHROOT$2"; MOUNTS+=("$CHROOT$2"); }
}
mounted_under() { awk -v p="$CHROOT/" 'index($2 "/", p) == 1' /proc/mounts | grep -q .; }

echo "== 1. fresh Debian 12 system in $CHROOT"
if [[ -e "$CHROOT" && ( $REUSE -eq 0 || ! -f "$CHROOT/$MARKER" ) ]]; then
  if [[ -n "$(ls -A "$CHROOT" 2>/dev/null)" && ! -f "$CHROOT/$MARKER" ]]; then
    echo "error: $CHROOT exists and was not made by this script ($MARKER missing): refusing to delete it" >&2; exit 2
  fi
  if mounted_under; then echo "error: something is mounted under $CHROOT: unmount it first" >&2; exit 2; fi
  rm -rf --one-file-system "$CHROOT"
fi
if [[ -f "$CHROOT/$MARKER" ]]; then
  INFO "reusing $CHROOT (--reuse: not a fresh system)"
else
  command -v debootstrap >/dev/null || check apt-get-install-debootstrap apt-get install -y debootstrap
  check debootstrap debootstrap --variant=minbase bookworm "$CHROOT" "$MIRROR" || exit 1
  rm -f "$CHROOT/etc/apt/sources.list"
  # What a Debian 12 installation has: the release, its updates and the security archive.
  cat >"$CHROOT/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  touch "$CHROOT/$MARKER"
fi
cp -L /etc/resolv.conf "$CHROOT/etc/resolv.conf"
mount_in proc /proc
mount_in sysfs /sys
mount_in tmpfs /dev/shm   # Open MPI's shared-memory transport

echo "== 2. the package: cpack --config $BUILD_DIR/CPackConfig.cmake -G DEB -B $PKG_DIR"
# cpack first builds the tree's preinstall target (= all): refuse an out-of-date Makefile tree rather
# than compile behind the caller's back (ALLOW_BUILD=1 lets cpack build it).
if [[ -f "$BUILD_DIR/Makefile" && "${ALLOW_BUILD:-0}" != 1 ]]; then
  stale=$(make -n -C "$BUILD_DIR" preinstall 2>/dev/null | grep -cE ' -c [^ ]*\.(cpp|cc|c)( |$)' || true)
  if [[ $stale -gt 0 ]]; then
    echo "error: $BUILD_DIR is out of date ($stale sources to compile) and cpack would build it: build it first, or ALLOW_BUILD=1" >&2
    exit 2
  fi
fi
check cpack cpack --config "$BUILD_DIR/CPackConfig.cmake" -G DEB -B "$PKG_DIR" || exit 1
debs=("$PKG_DIR"/tessera_*.deb)
[[ -f "${debs[0]}" && ${#debs[@]} -eq 1 ]] || { FAIL "cpack made one tessera_*.deb in $PKG_DIR (found: ${debs[*]})"; exit 1; }
DEB=$(basename "${debs[0]}")
INFO "$DEB: Depends: $(dpkg-deb -f "${debs[0]}" Depends)"
INFO "$DEB: Suggests: $(dpkg-deb -f "${debs[0]}" Suggests)"
rm -f "$CHROOT"/root/tessera_*.deb
cp "${debs[0]}" "$CHROOT/root/"

echo "== 3. inside the fresh system"
check apt-get-update in_chroot 'apt-get update' || exit 1
# Depends alone (no Recommends): every single-process command must work with just these.
check install-deb-depends-only in_chroot "cd /root && apt-get install -y --no-install-recommends ./$DEB" || exit 1
check ldd-all-libraries-found in_chroot 'ldd /usr/bin/tessera; ! ldd /usr/bin/tessera | grep "not found"' || true
check tessera-version in_chroot 'command -v tessera && tessera --version' || true
INFO "$(in_chroot 'tessera --version' 2>&1 | head -n 3 | tr '\n' ' ')"
check configs-installed in_chroot 'ls /usr/share/tessera/configs && test -f /usr/share/tessera/configs/tiny.toml' || true
# docs/usage.md, Installing: the shipped configs are found from any directory.
check plan-from-tmp in_chroot 'cd /tmp && tessera plan --config configs/tiny.toml' || true
# A tiny byte dataset from text every Debian system has, then docs/usage.md's quick start, a few steps.
check prepare-byte in_chroot 'tessera prepare /usr/share/common-licenses --out data/mine --tokenizer byte --overwrite' || true
check prepare-bpe-sentencepiece in_chroot \
  'tessera prepare /usr/share/common-licenses --out data/mine-bpe --tokenizer bpe --vocab-size 512 --overwrite && test -f data/mine-bpe/tokenizer.model' || true
# Single-process training with Depends alone: Open MPI 4's singleton MPI_Init starts orted, which only
# openmpi-bin has, so the package must depend on it.
TRAIN='rm -rf runs/tiny && tessera train --config configs/tiny.toml data.dir=data/mine train.steps=5 train.eval_interval=5 train.out_dir=runs/tiny --json | tee /dev/stderr | grep -Eq "\"steps_run\": ?5"'
check train-tiny-depends-only in_chroot "$TRAIN" || true
# The README's default corpus: --kjv reads Debian's bible-kjv, which the package does not pull in.
if in_chroot 'tessera prepare --kjv --tokenizer byte --out data/kjv' >"$LOG/kjv-without-bible-kjv.log" 2>&1; then
  INFO "prepare --kjv works without installing bible-kjv"
else
  INFO "prepare --kjv right after installing the .deb fails (exit $?): $(tail -n 1 "$LOG/kjv-without-bible-kjv.log")"
  check install-bible-kjv in_chroot 'apt-get install -y bible-kjv' || true
  check prepare-kjv-after-bible-kjv in_chroot 'tessera prepare --kjv --tokenizer byte --out data/kjv --overwrite' || true
fi

echo "== 4. what runs on from the trained run, and many ranks"
check depends-on-openmpi-bin in_chroot 'dpkg -s openmpi-bin >/dev/null' || true
check sample in_chroot 'tessera sample --run runs/tiny --prompt "The " --tokens 40 --seed 1' || true
check export-hf in_chroot 'rm -rf hf && tessera export --run runs/tiny --hf hf && ls hf && test -f hf/model.safetensors' || true
# A 2-rank data-parallel job (dp fills the job).
check mpirun-2-ranks in_chroot 'rm -rf runs/tiny-mpi && mpirun --allow-run-as-root --oversubscribe -np 2 tessera train --config configs/tiny.toml data.dir=data/mine train.steps=5 train.eval_interval=5 train.threads=1 train.out_dir=runs/tiny-mpi --json | tee /dev/stderr | grep -Eq "\"ranks\": ?2"' || true

echo "== summary: $pass passed, $fail failed (logs in $LOG)"
[[ $fail -eq 0 ]]
