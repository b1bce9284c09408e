#!/usr/bin/env bash
# Open MPI's "ssh" for the bed (plm_rsh_agent): `rsh_agent.sh [opts] HOST CMD...` runs CMD through a
# shell inside HOST's namespace (10.77.0.K -> tsnb<K-1>) with its own hostname (a UTS namespace), so
# each rank looks like a separate machine to Open MPI (session directories, locality, messages).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
while [[ $# -gt 0 && $1 == -* ]]; do shift; done  # ssh-style options Open MPI may pass: none apply
(( $# >= 2 )) || netbed_die "rsh_agent: usage: $0 HOST COMMAND..."
host=$1; shift
[[ $host =~ ^${NETBED_NET//./\\.}\.([0-9]+)$ ]] || netbed_die "rsh_agent: host '$host' is not a bed address ($NETBED_NET.K)"
ns=$NETBED_NS_PREFIX$((BASH_REMATCH[1] - 1))
ip netns list | grep -q "^$ns\b" || netbed_die "rsh_agent: namespace $ns for $host is not up (bench/netbed/up.sh)"
# Like ssh: the remote side does not inherit mpirun's own launch variables (PMIx/ORTE set them for
# the launcher, not for its daemons); the daemon's command line carries everything it needs.
for v in $(compgen -e); do
  case $v in OMPI_ALLOW_RUN_AS_ROOT*) ;; OMPI_*|PMIX_*|OPAL_*|ORTE_*) unset "$v" ;; esac
done
exec ip netns exec "$ns" unshare --uts /bin/sh -c 'echo "$0" > /proc/sys/kernel/hostname && exec /bin/sh -c "$1"' "$ns" "$*"
