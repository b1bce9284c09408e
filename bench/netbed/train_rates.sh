#!/usr/bin/env bash
# `tessera train` inside the bed: 4 ranks of data parallelism (one per namespace, MPI over TCP), a
# tiny model, the same job at each rate (default: no limit, 1gbit, 100mbit, 20mbit). Step time must
# grow as the rate drops once the gradient all-reduce outweighs compute. Each rate runs twice: with
# Open MPI's default non-blocking all-reduce (for the trainer's in-place buckets libnbc picks a binomial
# tree: reduce to rank 0, then broadcast) and with its ring (coll_libnbc_iallreduce_algorithm=1), the
# algorithm of the trainer's traffic model. Table + bench/results/netbed_train.json.
# Usage: bench/netbed/train_rates.sh [build_dir] [steps]   (env: RATES="none 1gbit 100mbit 20mbit" RANKS=4 MODEL=tiny
#        SEQ=64 MB=4). Needs root.
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-20}
RATES=${RATES:-"none 1gbit 100mbit 20mbit"}; RANKS=${RANKS:-4}; MODEL=${MODEL:-tiny}; SEQ=${SEQ:-64}; MB=${MB:-4}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
source "$HERE/bench/netbed/common.sh"
TESSERA=$BUILD/src/cli/tessera
[[ -x $TESSERA ]] || netbed_die "$TESSERA not built: cmake --build $BUILD --target tessera"
TESSERA=$(cd "$(dirname "$TESSERA")" && pwd)/tessera
OUT=$HERE/bench/results
mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/tessera-netbed-train.XXXXXX); trap 'rm -rf "$TMP"' EXIT
"$TESSERA" prepare --kjv --tokenizer byte --out "$TMP/kjv" >/dev/null
ROWS=()
for rate in $RATES; do
 for alg in default ring; do
  echo "== $RANKS ranks, rate $rate, all-reduce $alg" >&2
  ALG_ARGS=()
  [[ $alg == ring ]] && ALG_ARGS=(--mpi-arg --mca --mpi-arg coll_libnbc_iallreduce_algorithm --mpi-arg 1)
  "$HERE/bench/netbed/mpirun.sh" --ranks "$RANKS" --rate "$rate" --timeout 900 "${ALG_ARGS[@]}" -- "$TESSERA" train \
    --config "$HERE/tests/configs/tiny.toml" model.preset="$MODEL" data.dir="$TMP/kjv" data.seq_len="$SEQ" \
    parallel.dp="$RANKS" train.threads=1 train.micro_batch="$MB" train.batch_tokens=$((MB * SEQ * RANKS)) \
    train.steps="$STEPS" train.eval_interval=0 train.log_interval=1000 train.timeout_s=600 \
    train.out_dir="$TMP/run_${rate}_$alg" > "$TMP/$rate.log" || { cat "$TMP/$rate.log" >&2; netbed_die "training at rate $rate failed"; }
  done_line=$(grep '^done:' "$TMP/$rate.log") || netbed_die "no done line at rate $rate (log: $TMP/$rate.log)"
  echo "$done_line" >&2
  ROWS+=("$rate" "$done_line")
 done
done
/usr/bin/python3 - "$OUT/netbed_train.json" "$MODEL" "$RANKS" "$MB" "$SEQ" "$STEPS" "${ROWS[@]}" <<'PY'
import json, re, sys
out, model, ranks, mb, seq, steps = sys.argv[1:7]
ranks, mb, seq = int(ranks), int(mb), int(seq)
tokens = mb * seq * ranks
units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
def parse(line):
    tok_s = float(re.search(r"([0-9.]+) tok/s", line).group(1))
    return {"tokens_per_s": tok_s, "step_ms": 1000 * tokens / tok_s,
            "traffic_MiB_per_step": float(re.search(r"traffic ([0-9.]+) MiB/step", line).group(1))}
rows = []
args = sys.argv[7:]
for i in range(0, len(args), 4):  # (rate, default done line, rate, ring done line)
    rate = args[i]
    m = re.fullmatch(r"(\d+)(kbit|mbit|gbit)", rate)
    link = int(m.group(1)) * units[m.group(2)] / 8 if m else None  # bytes/s per direction
    d, r = parse(args[i + 1]), parse(args[i + 3])
    rows.append({"rate": rate, "default": d, "ring": r, "traffic_MiB_per_step": r["traffic_MiB_per_step"],
                 "wire_ms": 1000 * r["traffic_MiB_per_step"] * 1048576 / link if link else None})
base = rows[0]["ring"]["step_ms"]
print(f"\ntessera train in the bed: {ranks} ranks x 1 thread, model {model}, micro_batch {mb}, seq_len {seq}, "
      f"{steps} steps (first excluded); ms/step with Open MPI's default all-reduce and with its ring")
print(f"{'rate':>8} {'default ms':>11} {'ring ms':>9} {'ring x ' + rows[0]['rate']:>12} {'MiB/step/rank':>14} {'traffic/rate ms':>16}")
for r in rows:
    wire = f"{r['wire_ms']:.1f}" if r["wire_ms"] else "-"
    print(f"{r['rate']:>8} {r['default']['step_ms']:>11.1f} {r['ring']['step_ms']:>9.1f} {r['ring']['step_ms'] / base:>12.2f} "
          f"{r['traffic_MiB_per_step']:>14.2f} {wire:>16}")
json.dump({"model": model, "ranks": ranks, "micro_batch": mb, "seq_len": seq, "steps": int(steps), "rows": rows},
          open(out, "w"), indent=1)
PY
