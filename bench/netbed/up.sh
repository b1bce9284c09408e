#!/usr/bin/env bash
# Brings the slow-network bed up: N network namespaces (tsnb0..), each joined to bridge tsnbbr by a
# veth pair and rate-limited with tc tbf in both directions (egress of both veth ends), so every rank
# has a full-duplex link of RATE like a port on a switch. No latency emulation (netem is not here).
# Usage: bench/netbed/up.sh N RATE     (RATE: 100mbit, 1gbit, 20mbit, ... or 'none' for no tc limit)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
(( $# == 2 )) || netbed_die "usage: $0 N RATE   (e.g. $0 4 100mbit; RATE 'none' for no limit)"
N=$1 RATE=$2
[[ $N =~ ^[0-9]+$ ]] && (( N >= 1 && N <= 64 )) || netbed_die "N='$N': give the number of ranks, 1..64"
netbed_require
netbed_is_unlimited "$RATE" || BYTES=$(netbed_rate_bytes "$RATE")

# Refuse to build over a bed that is already up, or over a subnet the host already uses.
if ip link show "$NETBED_BRIDGE" >/dev/null 2>&1 || ip netns list | grep -q "^${NETBED_NS_PREFIX}[0-9]"; then
  netbed_die "a bed is already up (bridge $NETBED_BRIDGE or namespaces ${NETBED_NS_PREFIX}*); run bench/netbed/down.sh first"
fi
if [[ -n $(ip -4 route show "$NETBED_CIDR") ]] || ip -4 addr show | grep -q "inet $NETBED_NET\."; then
  netbed_die "subnet $NETBED_CIDR is already in use on this host; free it or edit NETBED_NET in $HERE/common.sh"
fi

# A failure half-way leaves nothing behind.
trap '"$HERE/down.sh" >/dev/null 2>&1 || true' ERR

ip link add "$NETBED_BRIDGE" type bridge
ip addr add "$NETBED_HOST_IP/24" dev "$NETBED_BRIDGE"  # mpirun (host namespace) reaches its daemons here
ip link set "$NETBED_BRIDGE" up

# Token bucket: 10 ms of traffic, at least 64 KB (the bucket must hold a full TSO segment and a timer
# tick's worth at the rate); a 50 ms queue before tbf drops, so TCP sees the rate, not losses.
shape() {  # shape <netns or ""> <dev>
  local nsarg=()
  [[ -n $1 ]] && nsarg=(-n "$1")
  local burst=$(( BYTES / 100 > 65536 ? BYTES / 100 : 65536 ))
  tc "${nsarg[@]}" qdisc add dev "$2" root tbf rate "$RATE" burst "$burst" latency 50ms
}

for ((i = 0; i < N; i++)); do
  ns=$NETBED_NS_PREFIX$i
  ip netns add "$ns"
  ip link add "${ns}h" type veth peer name "${ns}n"
  ip link set "${ns}n" netns "$ns"
  ip link set "${ns}h" master "$NETBED_BRIDGE" up
  ip -n "$ns" addr add "$NETBED_NET.$((i + 1))/24" dev "${ns}n"
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "${ns}n" up
  if ! netbed_is_unlimited "$RATE"; then
    shape "$ns" "${ns}n"  # what rank i sends
    shape "" "${ns}h"     # what rank i receives
  fi
done

mkdir -p "$NETBED_STATE"
printf 'ranks=%s\nrate=%s\n' "$N" "$RATE" > "$NETBED_STATE/state"
trap - ERR
echo "netbed: up: $N namespaces ${NETBED_NS_PREFIX}0..${NETBED_NS_PREFIX}$((N - 1)) at $NETBED_NET.1..$N, rate ${RATE} per direction and rank, bridge $NETBED_BRIDGE ($NETBED_HOST_IP)" >&2
