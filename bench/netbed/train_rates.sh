#!/usr/bin/env bash
# `tessera train` inside the bed: 4 ranks of data parallelism (one per namespace, MPI over TCP), a
# tiny model, the same job at each rate (default: no limit, 1gbit, 100mbit, 20mbit). Step time must
# grow as the rate drops once the gradient all-reduce outweighs compute. Each rate runs once per
# all-reduce algorithm (ALGS): default = no flag (from 64 KiB the communicator pins Rabenseifner for
# in-place calls at >= 4 ranks, what libnbc runs out of place, and the ring at 2-3 ranks;
# comm/mpi/libnbc_allreduce.h); ring = coll_libnbc_iallreduce_algorithm=1 (the trainer's traffic
# model); binomial = =2, the tree libnbc picks for every in-place call (and every call below 4 ranks)
# when left alone, i.e. the default before the pin (a user's setting is never overridden). Per-rank link bytes from the bed go into the JSON too.
# Table + bench/results/netbed_train.json.
# Usage: bench/netbed/train_rates.sh [build_dir] [steps]   (env: RATES="none 1gbit 100mbit 20mbit"
#        ALGS="default ring binomial" RANKS=4 MODEL=tiny SEQ=64 MB=4). Needs root.
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-20}
RATES=${RATES:-"none 1gbit 100mbit 20mbit"}; ALGS=${ALGS:-"default ring binomial"}; RANKS=${RANKS:-4}; MODEL=${MODEL:-tiny}; SEQ=${SEQ:-64}; MB=${MB:-4}
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
 for alg in $ALGS; do
  echo "== $RANKS ranks, rate $rate, all-reduce $alg" >&2
  ALG_ARGS=()
  case $alg in
    default) ;;
    ring) ALG_ARGS=(--mpi-arg --mca --mpi-arg coll_libnbc_iallreduce_algorithm --mpi-arg 1) ;;
    binomial) ALG_ARGS=(--mpi-arg --mca --mpi-arg coll_libnbc_iallreduce_algorithm --mpi-arg 2) ;;
    *) netbed_die "ALGS: '$alg' is not one of default, ring, binomial" ;;
  esac
  log=$TMP/${rate}_$alg
  "$HERE/bench/netbed/mpirun.sh" --ranks "$RANKS" --rate "$rate" --timeout 900 "${ALG_ARGS[@]}" -- "$TESSERA" train \
    --config "$HERE/tests/configs/tiny.toml" model.preset="$MODEL" data.dir="$TMP/kjv" data.seq_len="$SEQ" \
    parallel.dp="$RANKS" train.threads=1 train.micro_batch="$MB" train.batch_tokens=$((MB * SEQ * RANKS)) \
    train.steps="$STEPS" train.eval_interval=0 train.log_interval=1000 train.timeout_s=600 \
    train.out_dir="$TMP/run_${rate}_$alg" > "$log.out" 2> "$log.err" ||
    { cat "$log.out" "$log.err" >&2; netbed_die "training at rate $rate ($alg) failed"; }
  done_line=$(grep '^done:' "$log.out") || netbed_die "no done line at rate $rate, $alg (log: $log.out)"
  echo "$done_line" >&2
  grep '^netbed: rank' "$log.err" >&2 || true
  # "rank:sent:received,..." from the bed's per-link counters (printed as it goes down)
  links=$(sed -nE 's/^netbed: rank ([0-9]+) link: sent ([0-9]+) bytes, received ([0-9]+) bytes$/\1:\2:\3/p' "$log.err" | paste -sd,)
  ROWS+=("$rate" "$alg" "$done_line" "$links")
 done
done
/usr/bin/python3 - "$OUT/netbed_train.json" "$MODEL" "$RANKS" "$MB" "$SEQ" "$STEPS" "${ROWS[@]}" <<'PY'
import json, re, sys
out, model, ranks, mb, seq, steps = sys.argv[1:7]
ranks, mb, seq = int(ranks), int(mb), int(seq)
tokens = mb * seq * ranks
units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
def parse(line, links):
    tok_s = float(re.search(r"([0-9.]+) tok/s", line).group(1))
    per = {}
    for item in filter(None, links.split(",")):
        r, sent, recv = item.split(":")
        per[r] = {"sent_MB": int(sent) / 1e6, "received_MB": int(recv) / 1e6}
    return {"tokens_per_s": tok_s, "step_ms": 1000 * tokens / tok_s,
            "traffic_MiB_per_step": float(re.search(r"traffic ([0-9.]+) MiB/step", line).group(1)),
            "link_MB_whole_run": per}
rows, by_rate = [], {}
args = sys.argv[7:]
for i in range(0, len(args), 4):  # (rate, algorithm, done line, link bytes)
    rate, alg = args[i], args[i + 1]
    if rate not in by_rate:
        m = re.fullmatch(r"(\d+)(kbit|mbit|gbit)", rate)
        link = int(m.group(1)) * units[m.group(2)] / 8 if m else None  # bytes/s per direction
        by_rate[rate] = {"rate": rate, "link_bytes_per_s": link}
        rows.append(by_rate[rate])
    by_rate[rate][alg] = parse(args[i + 2], args[i + 3])
algs = [a for a in ("default", "ring", "binomial") if a in rows[0]]
for r in rows:
    mib = r[algs[0]]["traffic_MiB_per_step"]
    r["traffic_MiB_per_step"] = mib
    r["wire_ms"] = 1000 * mib * 1048576 / r["link_bytes_per_s"] if r["link_bytes_per_s"] else None
print(f"\ntessera train in the bed: {ranks} ranks x 1 thread, model {model}, micro_batch {mb}, seq_len {seq}, "
      f"{steps} steps (first excluded); ms/step by all-reduce algorithm (default: no flag; "
      f"binomial = libnbc's in-place default before the communicator pinned one)")
head = " ".join(f"{a + ' ms':>12}" for a in algs)
extra = f"{'binomial/default':>17}" if "binomial" in algs and "default" in algs else ""
print(f"{'rate':>8} {head} {extra} {'MiB/step/rank':>14} {'traffic/rate ms':>16} {'rank 0 / rank ' + str(ranks - 1) + ' sent (default)':>28}")
for r in rows:
    wire = f"{r['wire_ms']:.1f}" if r["wire_ms"] else "-"
    cells = " ".join(f"{r[a]['step_ms']:>12.1f}" for a in algs)
    ratio = f"{r['binomial']['step_ms'] / r['default']['step_ms']:>17.2f}" if extra else ""
    links = r[algs[0]]["link_MB_whole_run"]
    sent = (f"{links['0']['sent_MB']:.1f} / {links[str(ranks - 1)]['sent_MB']:.1f} MB"
            if "0" in links and str(ranks - 1) in links else "-")
    print(f"{r['rate']:>8} {cells} {ratio} {r['traffic_MiB_per_step']:>14.2f} {wire:>16} {sent:>28}")
json.dump({"model": model, "ranks": ranks, "micro_batch": mb, "seq_len": seq, "steps": int(steps),
           "algorithms": algs, "rows": rows}, open(out, "w"), indent=1)
PY
