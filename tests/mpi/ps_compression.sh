#!/bin/sh
# Parameter server with compressed pushes (comm.compression): 2 workers + 1 server, sync, 20 steps,
# once uncompressed and once per method. Each compressed run must train (its last loss at most
# 1.10 x the uncompressed run's) and push at most max_ratio of the uncompressed bytes per step (the
# answers stay f32: "pulled" must not change).
#   ps_compression.sh <tessera> <data_dir> <work_dir> <method>:<max_ratio>[:<key=value>] ...
set -e
tessera=$1; data=$2; work=$3; shift 3
config=$(dirname "$0")/../../tests/configs/tiny.toml
rm -rf "$work"; mkdir -p "$work"
train() {  # label overrides...
  label=$1; shift
  ${MPIEXEC:-mpiexec} --allow-run-as-root --oversubscribe -np 3 "$tessera" train --config "$config" \
    data.dir="$data" train.out_dir="$work/$label" train.threads=1 train.steps=20 train.micro_batch=4 \
    train.batch_tokens=512 train.eval_interval=0 train.timeout_s=60 parallel.mode=ps parallel.dp=2 "$@" \
    > "$work/$label.log" 2>&1 || { cat "$work/$label.log"; exit 1; }
  grep -o 'parameter server: pushed.*' "$work/$label.log"
}
train none
for spec in "$@"; do
  method=${spec%%:*}; rest=${spec#*:}; ratio=${rest%%:*}; extra=""
  [ "$rest" != "$ratio" ] && extra=${rest#*:}
  # shellcheck disable=SC2086  # extra is one key=value or empty
  train "$method" comm.compression="$method" $extra
  /usr/bin/python3 - "$work" "$method" "$ratio" <<'PY'
import json, re, sys
work, method, max_ratio = sys.argv[1], sys.argv[2], float(sys.argv[3])
def run(label):
    log = open(f"{work}/{label}.log").read()
    push, pull = map(float, re.search(r"pushed ([0-9.]+) MiB \+ pulled ([0-9.]+) MiB", log).groups())
    losses = [json.loads(l)["loss"] for l in open(f"{work}/{label}/metrics.jsonl") if '"loss"' in l]
    return push, pull, losses
p0, q0, l0 = run("none")
p, q, l = run(method)
ok = p <= max_ratio * p0 and abs(q - q0) < 1e-9 and l[-1] <= 1.10 * l0[-1] and l[-1] < l[0] - 0.5
print(f"{method}: pushed {p:.4f} MiB/step ({p / p0:.3f} of f32, limit {max_ratio}), pulled {q:.4f}, "
      f"loss {l[0]:.4f} -> {l[-1]:.4f} (uncompressed -> {l0[-1]:.4f}) {'ok' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
done
echo "PASS"
