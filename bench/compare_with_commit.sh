#!/usr/bin/env bash
# Proves a refactoring changed nothing, side by side with an earlier commit, in one run:
#   1. loss curves: every shipped config (configs/*.toml, a few steps each) and configs/tiny.toml
#      data-parallel at dp = 1, 2, 4 (same global batch), trained by the BASE and the NEW binary on the
#      same data; every loss / val_loss value in the two metrics.jsonl files must be bitwise identical
#      (exact text of the double, no tolerance). One line per run: IDENTICAL or DIFFERS (first step ...).
#   2. step time: bench_train_step on the benchmark models, BASE and NEW interleaved (B, N, B, N, ...)
#      on this shared, noisy machine; per-pair ratios new/base and their median.
#
# Usage: bench/compare_with_commit.sh BASE_REV [NEW_BUILD_DIR]
#   BASE_REV       any commit-ish (HEAD~1, a sha, a branch). It is checked out in a detached git worktree
#                  outside the repo, $CACHE_DIR/tessera-base-<sha> (default /tmp), and built there
#                  (Release, targets tessera + bench_train_step); reused when already built.
#   NEW_BUILD_DIR  the current tree's build (default: build), built beforehand with scripts/build.sh.
# Environment:
#   SKIP_LOSSES=1 / SKIP_BENCH=1   skip a part
#   STEPS=8 EVAL_INTERVAL=4        steps per shipped config (gpt2-sized presets: 2); DP_STEPS=20 for dp runs
#   THREADS=2                      threads of single-process runs and of the benchmark (dp runs: 1 per rank)
#   MODELS="bench-small:8:512 gpt2:1:1024"   benchmark models as preset:batch:seq
#   REPS=3                         benchmark pairs per model; BENCH_STEPS overrides the per-model steps
#                                  (default 5, 3 for gpt2*)
#   CACHE_DIR=/tmp                 where the base worktree and the prepared datasets (tessera-compare-data) live
#   JOBS=2                         parallel jobs of the base build
#   KEEP_RUNS=1                    keep the run directories (kept anyway when something fails)
# Exit status: 0 when all curves are identical (and every run succeeded), 1 otherwise; the benchmark
# only reports (a ratio below 1 on a noisy machine is not by itself a regression).
# Writes bench/results/compare_with_commit.json (git-ignored); nothing else inside the repository.
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
die() { echo "compare_with_commit: error: $*" >&2; exit 2; }
say() { echo "== $*"; }
[[ $# -ge 1 && $# -le 2 ]] || usage

REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
BASE_REV=$1
NEW_ARG=${2:-build}
if [[ -d $NEW_ARG ]]; then NEW_BUILD=$(cd "$NEW_ARG" && pwd)
elif [[ -d $REPO/$NEW_ARG ]]; then NEW_BUILD=$(cd "$REPO/$NEW_ARG" && pwd)
else die "NEW build directory '$NEW_ARG' not found: build the current tree first (scripts/build.sh)"; fi

SKIP_LOSSES=${SKIP_LOSSES:-0}
SKIP_BENCH=${SKIP_BENCH:-0}
STEPS=${STEPS:-8}
EVAL_INTERVAL=${EVAL_INTERVAL:-4}
DP_STEPS=${DP_STEPS:-20}
THREADS=${THREADS:-2}
MODELS=${MODELS:-"bench-small:8:512 gpt2:1:1024"}
REPS=${REPS:-3}
CACHE_DIR=${CACHE_DIR:-/tmp}
JOBS=${JOBS:-2}
KEEP_RUNS=${KEEP_RUNS:-0}

SHA=$(git -C "$REPO" rev-parse --verify --quiet "$BASE_REV^{commit}") || die "'$BASE_REV' is not a commit of $REPO"
NEW_HEAD=$(git -C "$REPO" rev-parse HEAD)
NEW_DIRTY=$(git -C "$REPO" --no-optional-locks status --porcelain --untracked-files=no | wc -l)
WT=$CACHE_DIR/tessera-base-${SHA:0:12}
DATA=$CACHE_DIR/tessera-compare-data
T0=$(date +%s)

NEW_TESSERA=$NEW_BUILD/src/cli/tessera
NEW_BENCH=$NEW_BUILD/bench/bench_train_step
[[ $SKIP_LOSSES == 1 || -x $NEW_TESSERA ]] || die "$NEW_TESSERA missing: build the current tree first (scripts/build.sh)"
[[ $SKIP_BENCH == 1 || -x $NEW_BENCH ]] || die "$NEW_BENCH missing: build the current tree first (scripts/build.sh)"
for b in "$NEW_TESSERA" "$NEW_BENCH"; do
  [[ -x $b ]] || continue
  stale=$(cd "$REPO" && find src bench -newer "$b" \( -name '*.cpp' -o -name '*.h' \) 2>/dev/null | head -3 | tr '\n' ' ')
  [[ -z $stale ]] || echo "warning: $b is older than source files ($stale...): NEW may not be the current tree" >&2
done

TIMES=()
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tessera-compare.XXXXXX")
FAILED=0
cleanup() {
  if [[ $KEEP_RUNS == 1 || $FAILED != 0 ]]; then echo "run directories and logs kept in $WORK"
  else rm -rf "$WORK"; fi
}
trap cleanup EXIT

echo "BASE: $BASE_REV = ${SHA:0:12} $(git -C "$REPO" log -1 --format=%s "$SHA" | cut -c1-70)"
echo "NEW:  $NEW_BUILD (tree at ${NEW_HEAD:0:12}$([[ $NEW_DIRTY == 0 ]] || echo ", $NEW_DIRTY uncommitted file(s)"))"

# ---------------------------------------------------------------- base build (git worktree, outside the repo)
build_base() {
  mkdir -p "$CACHE_DIR"
  exec 9>"$WT.lock"
  flock 9  # two comparisons against the same base build it once
  if [[ ! -e $WT/.git ]]; then
    [[ ! -e $WT ]] || die "$WT exists but is not a git worktree: remove it or set CACHE_DIR"
    say "checking out ${SHA:0:12} in $WT (git worktree, detached)"
    # -f: re-registers the path if an earlier worktree there was deleted without `git worktree prune`.
    git -C "$REPO" worktree add -f --detach "$WT" "$SHA" >/dev/null
  fi
  local at
  at=$(git -C "$WT" rev-parse HEAD)
  [[ $at == "$SHA" ]] || die "$WT is at ${at:0:12}, not ${SHA:0:12}: remove it (git worktree remove $WT)"
  local stamp=$WT/build/.compare_with_commit.built
  if [[ -f $stamp && -x $WT/build/src/cli/tessera && -x $WT/build/bench/bench_train_step ]]; then
    say "reusing the base build in $WT/build"
  else
    say "building ${SHA:0:12} (Release, -j$JOBS; log: $WT/build.log) ..."
    local t
    t=$(date +%s)
    if ! { cmake -S "$WT" -B "$WT/build" -DCMAKE_BUILD_TYPE=Release &&
           cmake --build "$WT/build" -j"$JOBS" --target tessera bench_train_step; } >"$WT/build.log" 2>&1; then
      tail -30 "$WT/build.log" >&2
      die "the base build failed (full log: $WT/build.log)"
    fi
    touch "$stamp"
    say "base built in $(( $(date +%s) - t )) s"
  fi
  exec 9>&-
}
build_base
BASE_TESSERA=$WT/build/src/cli/tessera
BASE_BENCH=$WT/build/bench/bench_train_step

# ---------------------------------------------------------------- loss curves
# toml_get FILE SECTION KEY -> the value ("" when absent)
toml_get() {
  "$PY" - "$@" <<'PY'
import sys, tomllib
f, sec, key = sys.argv[1:]
v = tomllib.load(open(f, "rb")).get(sec, {}).get(key, "")
print(v)
PY
}

# prepare NAME ARGS...: a dataset in $DATA/NAME, prepared once with the NEW binary.
prepare() {
  local name=$1; shift
  if [[ -f $DATA/$name.ok ]]; then return; fi
  say "preparing $DATA/$name (tessera prepare --kjv $*)"
  mkdir -p "$DATA"
  rm -rf "$DATA/$name.tmp"
  "$NEW_TESSERA" prepare --kjv "$@" --out "$DATA/$name.tmp" >"$DATA/$name.log" 2>&1 ||
    { tail -20 "$DATA/$name.log" >&2; die "tessera prepare failed (log: $DATA/$name.log)"; }
  rm -rf "${DATA:?}/$name"
  mv "$DATA/$name.tmp" "$DATA/$name"
  touch "$DATA/$name.ok"
}

# train_pair LABEL NP CONFIG OVERRIDES...: trains with BASE then NEW (NP 0 = plain process, else mpiexec
# -np NP) into fresh directories and compares the curves.
train_pair() {
  local label=$1 np=$2 config=$3; shift 3
  local side bin rc t
  t=$(date +%s)
  for side in base new; do
    [[ $side == base ]] && bin=$BASE_TESSERA || bin=$NEW_TESSERA
    local out=$WORK/$label/$side
    mkdir -p "$WORK/$label"
    local cmd=("$bin" train --config "$config" --quiet "$@" train.out_dir="$out")
    if [[ $np != 0 ]]; then
      cmd=(env OMP_NUM_THREADS=1 mpiexec --allow-run-as-root --oversubscribe -np "$np" "${cmd[@]}")
    fi
    rc=0
    (cd "$WORK" && "${cmd[@]}") >"$WORK/$label/$side.log" 2>&1 || rc=$?
    if [[ $rc != 0 ]]; then
      printf '%-24s FAILED (%s run exited with %d; log: %s)\n' "$label" "${side^^}" "$rc" "$WORK/$label/$side.log"
      tail -5 "$WORK/$label/$side.log" | sed 's/^/    /'
      FAILED=1
      return
    fi
  done
  "$PY" "$REPO/bench/compare_metrics.py" "$label" "$WORK/$label/base/metrics.jsonl" "$WORK/$label/new/metrics.jsonl" ||
    FAILED=1
  TIMES+=("$label $(( $(date +%s) - t ))s")
}

if [[ $SKIP_LOSSES != 1 ]]; then
  say "loss curves: BASE vs NEW, bitwise ($STEPS steps per config, threads $THREADS; dp runs $DP_STEPS steps, 1 thread/rank)"
  # Known datasets, keyed by the basename of a config's data.dir (see README.md and configs/*.toml).
  declare -A PREP=([kjv]="--tokenizer byte" [kjv-bpe]="--tokenizer bpe --vocab-size 4096")
  SUBSTITUTED=()
  COMMON=(train.eval_batches=2 train.checkpoint_interval=0 train.log_interval=1 train.timeout_s=600)
  for config in "$REPO"/configs/*.toml; do
    name=$(basename "$config" .toml)
    datadir=$(toml_get "$config" data dir)
    weights=$(toml_get "$config" model init_weights)
    preset=$(toml_get "$config" model preset)
    reasons=()
    extra=()
    if [[ -n ${PREP[$(basename "$datadir")]:-} ]]; then
      # shellcheck disable=SC2086
      prepare "$(basename "$datadir")" ${PREP[$(basename "$datadir")]}
      extra+=(data.dir="$DATA/$(basename "$datadir")")
    elif [[ -n $datadir && -d $REPO/$datadir ]]; then
      extra+=(data.dir="$REPO/$datadir")  # prepared by the user; only read
    else
      reasons+=("needs dataset '$datadir', which this script cannot prepare (not present in the repo)")
    fi
    if [[ -n $weights ]]; then
      if [[ -f $REPO/$weights ]]; then extra+=(model.init_weights="$REPO/$weights")
      else reasons+=("needs pretrained weights '$weights' (copied by hand, not present)"); fi
    fi
    if (( ${#reasons[@]} )); then
      # Still compare the config's model, optimizer and schedule: random init on the BPE KJV data
      # (any vocabulary >= 4096 holds its ids). Said in the label, so nobody mistakes it for the real job.
      why=$(printf '%s; ' "${reasons[@]}")
      printf '%-24s substituted: random init, kjv-bpe data (%s)\n' "$name" "${why%; }"
      prepare kjv-bpe --tokenizer bpe --vocab-size 4096
      extra=(data.dir="$DATA/kjv-bpe" model.init_weights=)
      name="${name}_substitute"
      SUBSTITUTED+=("$name")
    fi
    steps=$STEPS ev=$EVAL_INTERVAL
    if [[ $preset == gpt2* ]]; then steps=2 ev=2; fi  # 124M+ parameters: minutes per step on 2 cores
    train_pair "$name" 0 "$config" "${COMMON[@]}" "${extra[@]}" train.steps="$steps" train.eval_interval="$ev" \
      train.threads="$THREADS"
  done
  # Data parallelism: configs/tiny.toml with the same global batch (512 tokens) at dp = 1, 2, 4.
  prepare kjv --tokenizer byte
  for dp in 1 2 4; do
    train_pair "tiny_dp$dp" "$dp" "$REPO/configs/tiny.toml" "${COMMON[@]}" data.dir="$DATA/kjv" \
      train.steps="$DP_STEPS" train.eval_interval=10 train.threads=1 parallel.dp=$dp \
      train.micro_batch=$(( 8 / dp )) train.batch_tokens=512
  done
  say "loss curves done; seconds per BASE+NEW pair: ${TIMES[*]}"
fi

# ---------------------------------------------------------------- step-time benchmark
if [[ $SKIP_BENCH != 1 ]]; then
  say "benchmark: bench_train_step, threads $THREADS, $REPS interleaved BASE/NEW pair(s) per model"
  mkdir -p "$WORK/bench"
  BENCH_FILES=()
  for spec in $MODELS; do
    IFS=: read -r model B T <<<"$spec"
    [[ -n $model && -n $B && -n $T ]] || die "MODELS entry '$spec' is not preset:batch:seq"
    steps=${BENCH_STEPS:-5}
    [[ -n ${BENCH_STEPS:-} || $model != gpt2* ]] || steps=3
    for ((r = 1; r <= REPS; r++)); do
      for side in base new; do
        [[ $side == base ]] && bin=$BASE_BENCH || bin=$NEW_BENCH
        f=$WORK/bench/${model}_${B}x${T}_${side}_$r.json
        log=${f%.json}.log
        "$bin" --model "$model" --batch "$B" --seq "$T" --threads "$THREADS" --steps "$steps" --json "$f" >"$log" 2>&1 ||
          { cat "$log" >&2; FAILED=1; die "bench_train_step ($side) failed for $spec"; }
        printf '  %-12s %-4s pair %d/%d: %s tok/s\n' "$model" "$side" "$r" "$REPS" \
          "$("$PY" -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["tokens_per_s"]))' "$f")"
        BENCH_FILES+=("$spec=$side=$r=$f")
      done
    done
  done
  mkdir -p "$REPO/bench/results"
  "$PY" - "$REPO/bench/results/compare_with_commit.json" "$SHA" "$NEW_HEAD" "$NEW_DIRTY" "$THREADS" \
    "${BENCH_FILES[@]}" <<'PY'
import json, statistics, sys
out, base_sha, new_head, dirty, threads, *files = sys.argv[1:]
runs = {}
for entry in files:
    spec, side, rep, path = entry.split("=", 3)
    runs.setdefault(spec, {"base": {}, "new": {}})[side][int(rep)] = json.load(open(path))
rows = []
print(f"{'model':<22} {'base tok/s':>11} {'new tok/s':>11}  {'ratio new/base per pair':<28} {'median':>7}")
for spec, r in runs.items():
    reps = sorted(set(r["base"]) & set(r["new"]))
    b = [r["base"][i]["tokens_per_s"] for i in reps]
    n = [r["new"][i]["tokens_per_s"] for i in reps]
    ratios = [y / x for x, y in zip(b, n)]
    row = {"model": spec, "base_tokens_per_s": b, "new_tokens_per_s": n,
           "base_median": statistics.median(b), "new_median": statistics.median(n),
           "ratios": ratios, "median_ratio": statistics.median(ratios),
           "base_step_s": [r["base"][i]["step_s"] for i in reps], "new_step_s": [r["new"][i]["step_s"] for i in reps]}
    rows.append(row)
    print(f"{spec:<22} {row['base_median']:>11.0f} {row['new_median']:>11.0f}  "
          f"{' '.join(f'{x:.3f}' for x in ratios):<28} {row['median_ratio']:>7.3f}")
json.dump({"base_commit": base_sha, "new_head": new_head, "new_uncommitted_files": int(dirty),
           "threads": int(threads), "models": rows}, open(out, "w"), indent=1)
print(f"(ratio > 1: NEW is faster; wrote {out})")
PY
fi

echo "total wall time $(( $(date +%s) - T0 )) s"
if [[ $FAILED != 0 ]]; then
  echo "RESULT: DIFFERENCES OR FAILURES (see above)"
  exit 1
fi
[[ $SKIP_LOSSES == 1 ]] || echo "RESULT: all loss curves IDENTICAL${SUBSTITUTED:+ (${SUBSTITUTED[*]}: random init on kjv-bpe data)}"
