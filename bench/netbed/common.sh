# Shared names and checks of the slow-network bed (sourced by up.sh, down.sh, mpirun.sh, rsh_agent.sh).
# One bed at a time per machine: namespaces tsnb0..tsnb<N-1>, bridge tsnbbr, subnet 10.77.0.0/24.
NETBED_NS_PREFIX=tsnb
NETBED_BRIDGE=tsnbbr
NETBED_NET=10.77.0               # rank i (0-based) is 10.77.0.(i+1); the host end of the bridge is .254
NETBED_HOST_IP=$NETBED_NET.254
NETBED_CIDR=$NETBED_NET.0/24
NETBED_STATE=/run/tessera-netbed # state (ranks, rate) and the lock that keeps two beds apart
NETBED_LOCK=/run/tessera-netbed.lock

netbed_die() { echo "netbed: error: $*" >&2; exit 1; }

netbed_require() {  # root and the tools the bed is built from, or a clear error
  [[ $(id -u) == 0 ]] || netbed_die "the bed needs root (network namespaces, tc); run as root"
  local t
  for t in ip tc unshare flock timeout; do
    command -v "$t" >/dev/null || netbed_die "'$t' not found; install iproute2 / util-linux / coreutils"
  done
}

# tc rate "100mbit" -> bytes per second (for sizing the token bucket); dies on anything else.
netbed_rate_bytes() {
  local r=$1 num unit
  [[ $r =~ ^([0-9]+)(kbit|mbit|gbit)$ ]] ||
    netbed_die "rate '$r' not understood: give <number>kbit|mbit|gbit (e.g. 100mbit), or 'none' for no limit"
  num=${BASH_REMATCH[1]}; unit=${BASH_REMATCH[2]}
  (( num > 0 )) || netbed_die "rate '$r' must be positive (or 'none' for no limit)"
  case $unit in kbit) echo $((num * 1000 / 8)) ;; mbit) echo $((num * 1000000 / 8)) ;; gbit) echo $((num * 1000000000 / 8)) ;; esac
}

netbed_is_unlimited() { [[ $1 == none || $1 == 0 || $1 == unlimited ]]; }
