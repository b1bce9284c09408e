#!/usr/bin/env bash
# Checks that the bed's rate limit is real: raw MPI point-to-point bandwidth between two namespaces
# (bench_p2p_bandwidth) on a bed limited to RATE and on the same bed unlimited, in one run, against the
# configured rate (100mbit -> 12.5 MB/s of Ethernet frames, about 11.9 MB/s of TCP payload).
# Writes bench/results/netbed_rate.json. Needs root.
# Usage: bench/netbed/check_rate.sh [build_dir] [RATE]   (defaults: build, 100mbit; env SECONDS_PER_SIZE=1)
set -euo pipefail
BUILD=${1:-build}
RATE=${2:-100mbit}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
source "$HERE/bench/netbed/common.sh"
BENCH=$BUILD/bench/bench_p2p_bandwidth
[[ -x $BENCH ]] || netbed_die "$BENCH not built: cmake --build $BUILD --target bench_p2p_bandwidth"
BENCH=$(cd "$(dirname "$BENCH")" && pwd)/$(basename "$BENCH")
BYTES=$(netbed_rate_bytes "$RATE")
OUT=$HERE/bench/results
mkdir -p "$OUT"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
for r in "$RATE" none; do
  echo "== bed of 2 ranks, rate $r" >&2
  "$HERE/bench/netbed/mpirun.sh" --ranks 2 --rate "$r" --timeout 600 -- "$BENCH" \
    --seconds "${SECONDS_PER_SIZE:-1}" --json "$TMP/$r.json" >&2
done
/usr/bin/python3 - "$OUT/netbed_rate.json" "$RATE" "$BYTES" "$TMP/$RATE.json" "$TMP/none.json" <<'PY'
import json, sys
out, rate, rate_bytes, limited, free = sys.argv[1], sys.argv[2], int(sys.argv[3]), *sys.argv[4:]
lim, unl = json.load(open(limited)), json.load(open(free))
conf = rate_bytes / 1e6
print(f"\nconfigured {rate} = {conf:.2f} MB/s per direction (Ethernet frames); MB/s = 1e6 B/s of MPI payload")
print(f"{'bytes':>9} {'limited 0->1':>13} {'/configured':>11} {'limited both':>13} {'unlimited 0->1':>15} {'unlimited both':>15}")
for a, b in zip(lim, unl):
    print(f"{a['bytes']:>9} {a['one_way_MBps']:>13.2f} {a['one_way_MBps'] / conf:>11.2f} {a['both_ways_MBps_each']:>13.2f} "
          f"{b['one_way_MBps']:>15.2f} {b['both_ways_MBps_each']:>15.2f}")
big_l, big_u = lim[-1]["one_way_MBps"], unl[-1]["one_way_MBps"]
print(f"largest message: limited {big_l:.2f} MB/s = {100 * big_l / conf:.1f} % of the configured rate; "
      f"unlimited bed {big_u:.1f} MB/s = {big_u / big_l:.1f}x the limited one")
json.dump({"rate": rate, "configured_MBps": conf, "limited": lim, "unlimited": unl,
           "largest_limited_over_configured": big_l / conf, "unlimited_over_limited": big_u / big_l},
          open(out, "w"), indent=1)
PY
