#!/usr/bin/env bash
# Side-by-side training-step benchmark: Tessera (at each CPU kernel level) vs PyTorch CPU (each installed
# variant) on identical models, batch, threads and optimizer, in one run. Prints a table with the ratio to
# the fastest PyTorch variant and the share of the same-run sgemm peak, and writes
# bench/results/${RESULT_NAME:-model_bench}.json (per-run files go to bench/results/${RESULT_NAME}_runs/).
# Usage: bench/run_model_bench.sh [build_dir] [steps]
# Environment:
#   CONFIGS="gpt2:1:1024 bench-small:8:512 bench-tiny:8:256"   preset:batch:seq
#   THREADS="1 2"
#   CPU_ISAS="auto avx2"       Tessera's levels (--cpu-isa); a forced level equal to auto's is run once
#   TORCH_VENV=/work/venv-torch   a virtual environment with the newest PyTorch from PyPI (benchmark only:
#                              python3 -m venv DIR && DIR/bin/pip install torch numpy); skipped when absent
#   TORCH_VARIANTS="debian:manual venv:manual venv:sdpa venv:sdpa:compile"
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-5}
HERE=$(cd "$(dirname "$0")/.." && pwd)
RESULT_NAME=${RESULT_NAME:-model_bench}
SUMMARY=$HERE/bench/results/$RESULT_NAME.json
OUT=$HERE/bench/results
[[ $RESULT_NAME == model_bench ]] || OUT=$HERE/bench/results/${RESULT_NAME}_runs  # one machine's runs together
mkdir -p "$OUT"
CONFIGS=${CONFIGS:-"gpt2:1:1024 bench-small:8:512 bench-tiny:8:256"}
THREADS=${THREADS:-"1 2"}
CPU_ISAS=${CPU_ISAS:-"auto avx2"}
TORCH_VENV=${TORCH_VENV:-/work/venv-torch}
TORCH_VARIANTS=${TORCH_VARIANTS:-"debian:manual venv:manual venv:sdpa venv:sdpa:compile"}
AUTO_ISA=$("$BUILD/src/cli/tessera" --version | sed -n 's/^CPU kernels: \([a-z0-9_]*\) .*/\1/p')
RESULTS=()
for cfg in $CONFIGS; do
  IFS=: read -r model B T <<<"$cfg"
  for th in $THREADS; do
    for isa in $CPU_ISAS; do
      [[ $isa != auto && $isa == "$AUTO_ISA" && " $CPU_ISAS " == *" auto "* ]] && continue  # same as auto
      f="$OUT/tessera_${model}_${th}_${isa}.json"
      "$BUILD/bench/bench_train_step" --model "$model" --batch "$B" --seq "$T" --threads "$th" --steps "$STEPS" \
        --cpu-isa "$isa" --json "$f" >&2
      RESULTS+=("$f")
    done
    # PyTorch at the machine's own level, and, where Tessera runs a forced avx2 that is not the native
    # level, capped at AVX2 as well (its ATen kernels, MKL, oneDNN and OpenBLAS), so each Tessera level is
    # compared with PyTorch at the same level.
    caps=(native)
    [[ " $CPU_ISAS " == *" avx2 "* && $AUTO_ISA != avx2 ]] && caps+=(avx2)
    for cap in "${caps[@]}"; do
      capenv=()
      [[ $cap == avx2 ]] && capenv=(ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
                                   OPENBLAS_CORETYPE=Haswell TESSERA_BENCH_CPU_CAP=avx2)
      for variant in $TORCH_VARIANTS; do
        IFS=: read -r which attention compile <<<"$variant"
        if [[ $which == debian ]]; then
          # Debian's torch 1.13 at its best here: OpenMP OpenBLAS, OPENBLAS_CORETYPE unset for this process.
          py=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp
              OMP_NUM_THREADS="$th" "${capenv[@]}" /usr/bin/python3)
        else
          [[ -x $TORCH_VENV/bin/python ]] || continue
          py=(env -u OPENBLAS_CORETYPE OMP_NUM_THREADS="$th" TORCHINDUCTOR_COMPILE_THREADS=1 "${capenv[@]}"
              "$TORCH_VENV/bin/python")
        fi
        suffix=""
        [[ $cap == avx2 ]] && suffix=_avx2
        f="$OUT/pytorch_${model}_${th}_${which}_${attention}${compile:+_compile}${suffix}.json"
        flags=(--attention "$attention")
        [[ -n $compile ]] && flags+=(--compile)
        "${py[@]}" "$HERE/tools/bench_pytorch.py" --model "$model" --batch "$B" --seq "$T" --threads "$th" \
          --steps "$STEPS" "${flags[@]}" 2>/dev/null >"$f" || { echo "skipped: pytorch $variant $cap ($model)" >&2; continue; }
        RESULTS+=("$f")
      done
    done
  done
done
/usr/bin/python3 - "$SUMMARY" "$AUTO_ISA" "${RESULTS[@]}" <<'PY'
import json, sys
out, auto_isa, files = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = [json.load(open(f)) for f in files]
rows = []
# The speed targets of the ISA issue (gpt2 2.0x, the rest 1.5x the best PyTorch), and what Tessera's whole
# step would need to reach one: the target's tokens/s times Tessera's FLOPs per token, as a share of the
# same-run sgemm peak (above ~90 % no framework gets there: norms, softmax and AdamW cannot run at it).
TARGETS = {"gpt2": 2.0}
print(f"{'model':<12} {'thr':>3} {'tessera level':<14} {'tok/s':>8} {'best pytorch':<28} {'tok/s':>8} {'ratio':>6} "
      f"{'% peak':>7} {'target':>6} {'needs % peak':>12} {'RSS MiB T/P':>12}")
for t in (r for r in runs if r["impl"] == "tessera"):
    # A forced avx2 below the native level meets PyTorch capped at AVX2 too; every other level, PyTorch as is.
    cap = "avx2" if t["cpu_isa"] == "avx2" and auto_isa != "avx2" else "native"
    same = [p for p in runs if p["impl"] == "pytorch" and p["model"] == t["model"] and p["threads"] == t["threads"]
            and p.get("cpu_cap", "native") == cap]
    if not same:
        continue
    best = max(same, key=lambda p: p["tokens_per_s"])
    name = f"{best['torch'].split('+')[0]} {best.get('attention', 'manual')}" + (" compile" if best.get("compiled") else "")
    ratio = t["tokens_per_s"] / best["tokens_per_s"]
    target = TARGETS.get(t["model"], 1.5)
    needs = target * best["tokens_per_s"] * (t["gflops"] / t["tokens_per_s"]) / t["sgemm_peak_gflops"]
    rows.append({"tessera": t, "pytorch_best": best, "pytorch_all": same, "ratio": ratio, "target_ratio": target,
                 "target_needs_peak_fraction": needs})
    print(f"{t['model']:<12} {t['threads']:>3} {t['cpu_isa']:<14} {t['tokens_per_s']:>8.0f} {name:<28} "
          f"{best['tokens_per_s']:>8.0f} {ratio:>6.2f} {100*t['mfu']:>6.1f}% {target:>5.1f}x {100*needs:>11.1f}% "
          f"{t['peak_rss_mb']:>5.0f}/{best['peak_rss_mb']:<6.0f}")
print("every PyTorch variant (tok/s):")
for p in (r for r in runs if r["impl"] == "pytorch"):
    print(f"  {p['model']:<12} {p['threads']:>3} torch {p['torch']:<16} {p.get('attention', 'manual'):<7} "
          f"{'compile' if p.get('compiled') else 'eager':<8} {p.get('cpu_cap', 'native'):<7} {p['tokens_per_s']:>8.0f}")
json.dump(rows, open(out, "w"), indent=1)
PY
