#!/usr/bin/env bash
# What ZeRO's page hand-back costs on a CPU: stage 2 hands a layer's gradient pages back to the OS
# after its reduction, stage 3 also a layer's gathered parameters after use, and the next touch
# faults them in again (each fault zeroing its page). For ZeRO stages 0-3 at dp 2 (bench-small,
# micro-batches of 2 x 128, 2 per step, 1 thread per rank) this prints tokens/s, the ratio to stage 0,
# and the page faults per step of one rank (GNU time's minor faults), for one or more builds side by
# side, interleaved rep by rep (the best tok/s of REPS kept). Writes bench/results/zero_page_faults.json.
# Usage: bench/zero_page_faults.sh [build_dir ...]   (env: STEPS=8, REPS=2)
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILDS=()
for b in "${@:-build}"; do BUILDS+=("$(bench_build_dir "$b")"); done
BUILD=${BUILDS[0]}
STEPS=${STEPS:-8}
REPS=${REPS:-2}
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE OMPI_MCA_mpi_yield_when_idle=1
for rep in $(seq "$REPS"); do
  for zero in 0 1 2 3; do
    for b in "${!BUILDS[@]}"; do
      run=$TMP/b${b}_z${zero}_r${rep}
      echo "== ${BUILDS[$b]} zero=$zero rep $rep" >&2
      mpirun --allow-run-as-root --oversubscribe -np 2 /usr/bin/time -f %R -o "$run.faults" \
        "${BUILDS[$b]}/src/cli/tessera" train --config "$HERE/tests/configs/tiny.toml" model.preset=bench-small \
        data.dir="$TMP/kjv" data.seq_len=128 train.micro_batch=2 train.batch_tokens=1024 parallel.dp=2 \
        parallel.zero="$zero" train.threads=1 train.steps="$STEPS" train.eval_interval=0 train.timeout_s=300 \
        train.out_dir="$run" --quiet >"$run.log" 2>&1 || { cat "$run.log" >&2; exit 1; }
    done
  done
done
/usr/bin/python3 - "$TMP" "$OUT/zero_page_faults.json" "$STEPS" "$REPS" "${BUILDS[@]}" <<'PY'
import datetime, json, re, sys
tmp, out, steps, reps, builds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
rows = []
for b, build in enumerate(builds):
    base = None
    for zero in range(4):
        tok, faults = [], []
        for r in range(1, reps + 1):
            run = f"{tmp}/b{b}_z{zero}_r{r}"
            tok.append(float(re.search(r"^done: .*?([0-9.]+) tok/s", open(run + ".log").read(), re.M).group(1)))
            faults.append(int(open(run + ".faults").read().split()[-1]))
        best = max(tok)
        base = base or best
        rows.append({"build": build, "zero": zero, "tokens_per_s": best, "vs_zero0": best / base,
                     "page_faults_per_step": min(faults) / steps})
        print(f"{build:28s} zero {zero}: {best:8.0f} tok/s  {best / base:5.2f}x zero 0  "
              f"{min(faults) / steps:9.0f} page faults per step (one rank)")
json.dump({"date": datetime.datetime.now().isoformat(timespec="seconds"), "steps": steps, "reps": reps,
           "model": "bench-small, dp 2, micro-batch 2 x 128, 2 per step, 1 thread per rank", "rows": rows},
          open(out, "w"), indent=1)
print("wrote", out)
PY
