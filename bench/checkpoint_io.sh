#!/usr/bin/env bash
# Checkpoint I/O benchmark (issue 10), everything in one run on the same disk:
#   1. raw sequential write with fsync (dd conv=fsync) of as many bytes as one checkpoint: the reference
#   2. a synchronous checkpoint (every 3rd step) of bench-small (params + AdamW moments, fp32) on 1 and 2 ranks:
#      bytes / save time, against (1)
#   3. the same with train.async_checkpoint = true: the training stall (snapshot) against (2)
#   4. a rank SIGKILLed under `tessera launch`: seconds from its death being detected to the
#      restarted job's first completed step (restarts.jsonl recovery_s)
# Writes bench/results/checkpoint_io_<model>[_tokens<N>].json and prints a table.
# Usage: [MODEL=...] [TOKENS=...] bench/checkpoint_io.sh [build_dir] [dir]
# (dir: where checkpoints are written; default a temp directory on the run directory's disk).
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
MODEL=${MODEL:-bench-small}  # e.g. MODEL=gpt2 for a 1.5 GB checkpoint
TOKENS=${TOKENS:-64}         # tokens per rank and step (64-token micro-batches): longer steps let an
                             # asynchronous save write from the live buffers while the next step computes
SUFFIX=$([[ $TOKENS == 64 ]] || echo "_tokens$TOKENS")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
BENCH_TMP=${2:-$(mktemp -d -p "$(cd "$(dirname "$0")/.." && pwd)")}  # on the run directory's disk
source "$(dirname "$0")/lib.sh"
train() {  # label np overrides...
  local label=$1 np=$2; shift 2
  mpirun --allow-run-as-root --oversubscribe -np "$np" "$TESSERA" train --config "$HERE/tests/configs/tiny.toml" --quiet \
    model.preset="$MODEL" model.vocab_size=256 data.dir="$TMP/kjv" data.seq_len=64 parallel.dp="$np" \
    train.threads=1 train.micro_batch=1 train.batch_tokens=$((TOKENS * np)) train.steps=9 train.checkpoint_interval=3 \
    train.keep_checkpoints=1 train.eval_interval=0 train.timeout_s=300 train.out_dir="$TMP/$label" "$@" \
    > "$TMP/$label.log" 2>&1 || { cat "$TMP/$label.log" >&2; exit 1; }
}
for np in 1 2; do
  echo "== $np rank(s): synchronous, then asynchronous checkpoints every 3rd step" >&2
  train "sync$np" "$np"
  train "async$np" "$np" train.async_checkpoint=true
done
bytes=$(du -sb "$TMP/sync1/checkpoints/step_00000009" | cut -f1)
echo "== raw: dd of $bytes bytes with fsync" >&2
raw=()
for i in 1 2 3; do
  s=$(date +%s.%N)
  dd if=/dev/zero of="$TMP/raw.bin" bs=1M count=$((bytes / 1048576 + 1)) conv=fsync status=none
  e=$(date +%s.%N); rm -f "$TMP/raw.bin"
  raw+=("$(echo "$e - $s" | bc -l)")
done
# The same, into new files while the earlier ones stay, as a checkpoint must (the previous one is
# deleted only once the new one is complete). Some virtual disks write blocks just freed by rm
# several times faster than blocks not written before, so both references are reported.
raw_new=()
for i in 1 2 3; do
  s=$(date +%s.%N)
  dd if=/dev/zero of="$TMP/raw_new$i.bin" bs=1M count=$((bytes / 1048576 + 1)) conv=fsync status=none
  e=$(date +%s.%N)
  raw_new+=("$(echo "$e - $s" | bc -l)")
done
rm -f "$TMP"/raw_new*.bin
echo "== recovery: a rank SIGKILLed at step 6 under tessera launch" >&2
TESSERA_FAULT=crash:rank=1:step=6 "$TESSERA" launch --max-restarts 1 --grace 2 --heartbeat-timeout 120 --run-dir "$TMP/drill" -- \
  mpirun --allow-run-as-root --oversubscribe -n 2 "$TESSERA" train --config "$HERE/tests/configs/tiny.toml" --quiet \
  model.preset=bench-small model.vocab_size=256 data.dir="$TMP/kjv" data.seq_len=64 parallel.dp=2 train.threads=1 \
  train.micro_batch=1 train.batch_tokens=128 train.steps=8 train.checkpoint_interval=2 train.eval_interval=0 \
  train.timeout_s=300 train.out_dir="$TMP/drill" > "$TMP/drill.log" 2>&1 \
  < /dev/null || { cat "$TMP/drill.log" >&2; exit 1; } &
wait $!
/usr/bin/python3 - "$TMP" "$bytes" "$OUT/checkpoint_io_$MODEL$SUFFIX.json" "${raw[*]}" "${raw_new[*]}" <<'PY'
import json, sys
tmp, nbytes, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
raw, raw_new = [float(x) for x in sys.argv[4].split()], [float(x) for x in sys.argv[5].split()]
def saves(label):
    ev = [json.loads(l) for l in open(f"{tmp}/{label}/metrics.jsonl")]
    s = [e for e in ev if e.get("event") == "checkpoint"]
    # An asynchronous save writes the parameters and moments from the live buffers; the next step's
    # optimizer update waits until they are written: that wait is part of the save's stall.
    waits = {e["step"]: e["wait_s"] for e in ev if e.get("event") == "checkpoint_write_wait"}
    for e in s:
        e["write_wait_s"] = waits.get(e["step"] + 1, 0.0)
        e["stall_s"] += e["write_wait_s"]
    # the first save also creates directories and allocates the snapshot; the last one waits for
    # its write to finish (the run ends): the middle one is the steady state
    return s[1:-1] or s
def stalls(label):
    return [e["stall_s"] for e in saves(label)]
raw_s, raw_new_s = min(raw), min(raw_new)
rows = {}
for np in (1, 2):
    sync, asyn = stalls(f"sync{np}"), stalls(f"async{np}")
    rows[np] = {"sync_s": min(sync), "async_stall_s": min(asyn)}
    rows[np]["write_mb_s"] = nbytes / rows[np]["sync_s"] / 1e6
    rows[np]["vs_raw"] = raw_s / rows[np]["sync_s"]
    rows[np]["vs_raw_new_files"] = raw_new_s / rows[np]["sync_s"]
    rows[np]["async_over_sync"] = rows[np]["async_stall_s"] / rows[np]["sync_s"]
    best = min(saves(f"async{np}"), key=lambda e: e["stall_s"])
    rows[np]["async_wait_previous_s"] = best.get("wait_previous_s")
    rows[np]["async_snapshot_s"] = best.get("snapshot_s")
    rows[np]["async_write_wait_s"] = best.get("write_wait_s")
restarts = [json.loads(l) for l in open(f"{tmp}/drill/launch/restarts.jsonl")]
recovery = [r.get("recovery_s") for r in restarts if r.get("recovery_s") is not None]
result = {"checkpoint_bytes": nbytes, "raw_fsync_write_s": raw_s, "raw_mb_s": nbytes / raw_s / 1e6,
          "raw_new_files_fsync_write_s": raw_new_s, "raw_new_files_mb_s": nbytes / raw_new_s / 1e6,
          "ranks": rows, "recovery_s": recovery, "restarts": restarts}
json.dump(result, open(out, "w"), indent=1)
print(f"checkpoint (params + AdamW m, v): {nbytes / 1e6:.1f} MB; raw dd+fsync {nbytes / raw_s / 1e6:.0f} MB/s "
      f"(file removed between runs), {nbytes / raw_new_s / 1e6:.0f} MB/s (new files, the earlier kept: 'vs new')")
print(f"{'ranks':>5} {'sync save s':>12} {'MB/s':>8} {'vs raw':>7} {'vs new':>7} {'async stall s':>14} {'(prev + copy + write)':>22} {'async/sync':>11}")
for np, r in rows.items():
    split = f"{r['async_wait_previous_s']:.4f}+{r['async_snapshot_s']:.4f}+{r['async_write_wait_s']:.4f}"
    print(f"{np:>5} {r['sync_s']:>12.4f} {r['write_mb_s']:>8.0f} {r['vs_raw']:>7.2f} {r['vs_raw_new_files']:>7.2f} {r['async_stall_s']:>14.4f} {split:>22} {r['async_over_sync']:>11.3f}")
print("recovery (death detected -> first step of the restarted job):", ", ".join(f"{x:.1f} s" for x in recovery))
PY
