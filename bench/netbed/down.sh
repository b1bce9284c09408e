#!/usr/bin/env bash
# Tears the slow-network bed down: every tsnb* namespace (its veth pair goes with it) and the bridge.
# Idempotent: safe to run when nothing, or only part of a bed, is up. Never touches other interfaces.
# Usage: bench/netbed/down.sh
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
[[ $(id -u) == 0 ]] || netbed_die "the bed needs root to tear down; run as root"
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${NETBED_NS_PREFIX}[0-9]+$"); do
  # Processes left in a namespace (a crashed run) would keep it alive: end them first.
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  [[ -n $pids ]] && kill -9 $pids 2>/dev/null
  ip netns del "$ns" 2>/dev/null
done
# Host ends whose namespace is already gone vanish with it; delete any stragglers by exact name.
for dev in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^${NETBED_NS_PREFIX}[0-9]+h$"); do
  ip link del "$dev" 2>/dev/null
done
ip link show "$NETBED_BRIDGE" >/dev/null 2>&1 && ip link del "$NETBED_BRIDGE"
rm -f "$NETBED_STATE/state"
exit 0
