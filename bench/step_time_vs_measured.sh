#!/usr/bin/env bash
# The step-time model against real runs: this machine is calibrated once for the model (`tessera plan
# --calibrate --config` under mpirun -np 2: GEMM, attention, memory, op overhead, the model's probe,
# all-reduce alpha-beta and overlap at its gradient's size), then each layout
# below trains a few steps with train.hardware pointing at that file, so the run's own prediction
# (plan/step_time_model.h) and its measured mean step (first step excluded) come from the same
# --json summary and metrics.jsonl. Prints predicted vs measured step time side by side with the
# error (measured / predicted - 1), the predicted breakdown and the measured collective wait (and for
# pipelines the busiest stage's compute and its waits on the other stages, predicted and measured), and
# writes bench/results/step_time_vs_measured.json. Run it on a quiet machine: the load average is
# printed before and after, and a busy machine's numbers say little about the model.
# The model: tiny widened to 4 layers of width 128 (0.9M parameters; byte-level KJV), micro-batch 4 x 64.
# Ranks beyond the cores (the 4-rank layouts on 2 cores) share cores, which the model does not know.
# Usage: bench/step_time_vs_measured.sh [build_dir] [steps]
#   (env: TARGET=0.15 relative error allowed; ONLY=label,label; HARDWARE=file to skip calibrating, or
#    HARDWARE=start for each run's own brief measurement at start (no train.hardware); TIMEOUT=300 per run;
#    MODEL="model.preset=bench-small data.seq_len=128 train.micro_batch=2": another model, its micro-batch
#    of 256 tokens like the default's; RESULT=name: bench/results/<name>.json)
# The bf16 rows get a file of their own, calibrated for the model at train.precision = "bf16" (its probe
# then rounds operands as those runs do; docs/config.md): one file per precision, as a user would.
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
STEPS=${2:-30}
TARGET=${TARGET:-0.15}
TIMEOUT=${TIMEOUT:-300}
MODEL=${MODEL:-model.n_layer=4 model.d_model=128 model.d_ff=512 data.seq_len=64 train.micro_batch=4}
RESULT=${RESULT:-step_time_vs_measured}
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
CONFIG=$HERE/tests/configs/tiny.toml
MPI=(mpirun --allow-run-as-root --oversubscribe)
echo "load before: $(uptime)"
HW=${HARDWARE:-$TMP/hardware.toml}
HW_KEY=train.hardware=$HW
if [[ -z ${HARDWARE:-} ]]; then
  # shellcheck disable=SC2086  # $MODEL is a list of overrides
  "${MPI[@]}" -np 2 "$TESSERA" plan --calibrate --config "$CONFIG" $MODEL --name this-machine --out "$HW"
elif [[ $HARDWARE == start ]]; then
  HW_KEY= HW=/dev/null
  unset TESSERA_HARDWARE  # the runs' own measurement, not a file from the environment
fi

BASE="$MODEL train.threads=1 train.eval_interval=0 train.log_interval=1 train.steps=$STEPS data.dir=$TMP/kjv $HW_KEY"
CONFIGS=(  # label|ranks|overrides
  "dp1|1|train.batch_tokens=256"
  "dp1_accum4|1|train.batch_tokens=1024"
  "dp1_selective|1|train.batch_tokens=256 train.recompute=selective"
  "dp1_full|1|train.batch_tokens=256 train.recompute=full"
  "dp1_bf16|1|train.batch_tokens=256 train.precision=bf16"
  "dp2|2|parallel.dp=2 train.batch_tokens=512"
  "dp2_accum2|2|parallel.dp=2 train.batch_tokens=1024"
  "dp2_zero1|2|parallel.dp=2 parallel.zero=1 train.batch_tokens=512"
  "dp2_zero2|2|parallel.dp=2 parallel.zero=2 train.batch_tokens=512"
  "dp2_zero3|2|parallel.dp=2 parallel.zero=3 train.batch_tokens=512"
  "dp2_zero1_bf16|2|parallel.dp=2 parallel.zero=1 train.batch_tokens=512 train.precision=bf16"
  "tp2|2|parallel.tp=2 train.batch_tokens=256"
  "tp2_sp|2|parallel.tp=2 parallel.sequence_parallel=true train.batch_tokens=256"
  "pp2_1f1b|2|parallel.pp=2 train.batch_tokens=1024"
  "pp2_gpipe|2|parallel.pp=2 parallel.schedule=gpipe train.batch_tokens=1024"
  "pp2_interleaved|2|parallel.pp=2 parallel.schedule=interleaved parallel.virtual_stages=2 train.batch_tokens=1024"
  "pp2_zb_h1|2|parallel.pp=2 parallel.schedule=zb-h1 train.batch_tokens=1024"
  "pp2_1f1b_full|2|parallel.pp=2 train.batch_tokens=1024 train.recompute=full"
  "dp2_tp2|4|parallel.dp=2 parallel.tp=2 train.batch_tokens=512"
  "dp2_pp2|4|parallel.dp=2 parallel.pp=2 train.batch_tokens=2048"
)
: > "$TMP/runs.txt"
for entry in "${CONFIGS[@]}"; do
  IFS='|' read -r label np over <<< "$entry"
  if [[ -n ${ONLY:-} && ,$ONLY, != *,$label,* ]]; then continue; fi
  run=$TMP/$label
  if [[ -z ${HARDWARE:-} && $over == *train.precision=bf16* ]]; then
    if [[ ! -f $TMP/hardware_bf16.toml ]]; then
      # shellcheck disable=SC2086  # $MODEL is a list of overrides
      "${MPI[@]}" -np 2 "$TESSERA" plan --calibrate --config "$CONFIG" $MODEL train.precision=bf16 --name this-machine-bf16 \
        --out "$TMP/hardware_bf16.toml"
    fi
    over="$over train.hardware=$TMP/hardware_bf16.toml"
  fi
  # shellcheck disable=SC2086  # $BASE and $over are lists of overrides
  if timeout "$TIMEOUT" "${MPI[@]}" -np "$np" "$TESSERA" train --config "$CONFIG" $BASE $over \
      train.out_dir="$run" --json > "$run.json" 2> "$run.log"; then
    echo "$label|$np|$over|ok" >> "$TMP/runs.txt"
  else
    echo "$label: train failed: $(tail -3 "$run.log")" >&2
    echo "$label|$np|$over|failed" >> "$TMP/runs.txt"
  fi
done
echo "load after: $(uptime)"

/usr/bin/python3 - "$TMP" "$OUT/$RESULT.json" "$TARGET" "$STEPS" "$HW" "$(uptime)" <<'PY'
import json, sys, datetime
tmp, out_path, target, steps, hw_path, load = sys.argv[1:7]
target, steps = float(target), int(steps)
rows, results, within = [], [], 0
for line in open(f"{tmp}/runs.txt"):
    label, np_, over, state = line.rstrip("\n").split("|")
    entry = {"label": label, "ranks": int(np_), "overrides": over, "state": state}
    results.append(entry)
    if state != "ok":
        continue
    ev = [json.loads(l) for l in open(f"{tmp}/{label}/metrics.jsonl")]
    cmp = [e for e in ev if e.get("event") == "step_time_vs_predicted"][-1]
    p, m = cmp["predicted"], cmp["measured"]
    err = cmp["step_error"]
    within += abs(err) <= target
    entry.update({"predicted": p, "measured": m, "step_error": err,
                  "predicted_pipeline_wait_s": cmp["predicted_pipeline_wait_s"]})
    b = p["breakdown"]
    rows.append((label, int(np_), p["step_s"], m["step_s"], err, b["compute_s"], b["bubble_s"],
                 b["tp_comm_s"] + b["pp_comm_s"] + b["dp_comm_s"], m["comm_wait_s"], cmp["predicted_runner_s"],
                 m["runner_s"], b["compute_s"] + b["tp_comm_s"], m["busiest_compute_s"],
                 cmp["predicted_pipeline_wait_s"], m["pipeline_wait_s"], "pp=" in over and "pp=1" not in over))
# The last two column pairs at pp > 1: the busiest stage's compute (tp included) and its pipeline waits.
print(f"{'layout':<18} {'np':>2} {'pred ms':>9} {'meas ms':>9} {'error':>7} | {'compute':>8} {'bubble':>7} "
      f"{'comm':>7} {'meas wait':>9} | {'runner pred':>11} {'meas':>7} | {'busiest pred':>12} {'meas':>7} "
      f"{'pp wait pred':>12} {'meas':>7}")
for r in rows:
    pipe = (f" | {1e3 * r[11]:>12.3f} {1e3 * r[12]:>7.3f} {1e3 * r[13]:>12.3f} {1e3 * r[14]:>7.3f}" if r[15] else "")
    print(f"{r[0]:<18} {r[1]:>2} {1e3 * r[2]:>9.3f} {1e3 * r[3]:>9.3f} {100 * r[4]:>6.1f}% | {1e3 * r[5]:>8.3f} "
          f"{1e3 * r[6]:>7.3f} {1e3 * r[7]:>7.3f} {1e3 * r[8]:>9.3f} | {1e3 * r[9]:>11.3f} {1e3 * r[10]:>7.3f}{pipe}")
errs = sorted(abs(r[4]) for r in rows)
if errs:
    print(f"{within} of {len(rows)} layouts within {100 * target:.0f}%; median |error| {100 * errs[len(errs) // 2]:.1f}%, "
          f"worst {100 * errs[-1]:.1f}%")
failed = [r["label"] for r in results if r["state"] != "ok"]
if failed:
    print("failed: " + ", ".join(failed))
json.dump({"date": datetime.datetime.now().isoformat(timespec="seconds"), "steps": steps, "target": target,
           "load_after": load, "hardware": open(hw_path).read(), "within_target": within, "configs": results},
          open(out_path, "w"), indent=1)
print(f"wrote {out_path}")
PY
