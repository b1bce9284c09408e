#!/bin/sh
# Parameter server, asynchronous modes with model-parallel workers: one layout (replicas of tp x pp
# ranks) trains 20 steps once per consistency (sync, async, ssp with staleness 1) with the first
# replica's first worker slowed 2x (TESSERA_FAULT slow). Checks
#   - every mode completes and async and ssp converge: validation loss <= sync's x (1 + margin);
#   - the ssp bound holds on every answered push of every server's log (step - slowest <= 1).
#   ps_async_model_parallel.sh <tessera> <data_dir> <work_dir> <margin> <np> <overrides...>
set -e
tessera=$1; data=$2; work=$3; margin=$4; np=$5; shift 5
config=$(dirname "$0")/../../tests/configs/tiny.toml
rm -rf "$work"; mkdir -p "$work"
for mode in sync async ssp; do
  echo "== ps.consistency = $mode: $np ranks: $*"
  TESSERA_FAULT="slow:rank=0:step=1:factor=2" ${MPIEXEC:-mpiexec} --allow-run-as-root --oversubscribe -x TESSERA_FAULT \
    -np "$np" "$tessera" train --config "$config" --quiet data.dir="$data" train.out_dir="$work/$mode" train.threads=1 \
    train.steps=20 train.micro_batch=2 train.batch_tokens=512 train.eval_interval=20 train.eval_batches=1 \
    train.timeout_s=60 parallel.mode=ps ps.consistency=$mode ps.staleness=1 "$@"
done
exec /usr/bin/python3 - "$work" "$margin" <<'PY'
import glob, json, sys
work, margin = sys.argv[1], float(sys.argv[2])
def val(mode):
    evals = [json.loads(l) for l in open(f"{work}/{mode}/metrics.jsonl") if '"val_loss"' in l]
    return evals[-1]["val_loss"]
ok = True
sync = val("sync")
for mode in ("async", "ssp"):
    v = val(mode)
    good = v <= sync * (1 + margin)
    ok &= good
    print(f"{mode}: val loss {v:.4f} vs sync {sync:.4f} (limit {sync * (1 + margin):.4f}) {'ok' if good else 'FAIL'}")
recs = [json.loads(l) for p in glob.glob(f"{work}/ssp/ps_server*.jsonl") for l in open(p)]
ahead = max(r["step"] - r["slowest"] for r in recs)
print(f"ssp: {len(recs)} answered pushes logged, at most {ahead} step(s) ahead of the slowest (staleness 1)")
if ahead > 1: ok = False; print("FAIL: ssp answered a worker more than ps.staleness steps ahead of the slowest")
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
