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
#   PRECISIONS="fp32 bf16"     each framework's mixed precision too: Tessera's train.precision (--precision)
#                              against PyTorch's torch.autocast (--autocast bf16), at the native level only;
#                              default fp32 and, where the CPU multiplies bf16 natively (level avx512_bf16), bf16
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
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
DEFAULT_PRECISIONS=fp32
[[ $AUTO_ISA == avx512_bf16 ]] && DEFAULT_PRECISIONS="fp32 bf16"
PRECISIONS=${PRECISIONS:-$DEFAULT_PRECISIONS}
RESULTS=()
precision_suffix() { [[ $1 == fp32 ]] || echo "_$1"; }  # fp32 files keep their earlier names
for cfg in $CONFIGS; do
  IFS=: read -r model B T <<<"$cfg"
  for th in $THREADS; do
    for isa in $CPU_ISAS; do
      [[ $isa != auto && $isa == "$AUTO_ISA" && " $CPU_ISAS " == *" auto "* ]] && continue  # same as auto
        for prec in $PRECISIONS; do
          [[ $prec != fp32 && $isa != auto ]] && continue  # mixed precision at the native level only
          f="$OUT/tessera_${model}_${th}_${isa}$(precision_suffix "$prec").json"
          "$BUILD/bench/bench_train_step" --model "$model" --batch "$B" --seq "$T" --threads "$th" --steps "$STEPS" \
            --cpu-isa "$isa" --precision "$prec" --json "$f" >&2
          RESULTS+=("$f")
        done
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
        for prec in $PRECISIONS; do
          [[ $prec != fp32 && $cap != native ]] && continue
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
          f="$OUT/pytorch_${model}_${th}_${which}_${attention}${compile:+_compile}${suffix}$(precision_suffix "$prec").json"
          flags=(--attention "$attention")
          [[ -n $compile ]] && flags+=(--compile)
          [[ $prec == bf16 ]] && flags+=(--autocast bf16)
          "${py[@]}" "$HERE/tools/bench_pytorch.py" --model "$model" --batch "$B" --seq "$T" --threads "$th" \
            --steps "$STEPS" "${flags[@]}" 2>/dev/null >"$f" || { echo "skipped: pytorch $variant $prec $cap ($model)" >&2; continue; }
          RESULTS+=("$f")
        done
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
# same-run matmul peak at the row's precision (above ~90 % no framework gets there: norms, softmax and
# AdamW cannot run at it). "% peak" is the row's own share of that peak.
TARGETS = {"gpt2": 2.0}


def precision(r):
    return r.get("precision", "fp32")


def pytorch_name(p):
    return (f"{p['torch'].split('+')[0]} {p.get('attention', 'manual')}" + (" compile" if p.get("compiled") else "")
            + ("" if precision(p) == "fp32" else " " + precision(p)))


def peak(t):  # the same-run matmul peak at the row's precision (older files: the f32 sgemm's)
    return t.get("precision_peak_gflops") or t["sgemm_peak_gflops"]


def needs_peak(t, target, best):
    return target * best["tokens_per_s"] * (t["gflops"] / t["tokens_per_s"]) / peak(t)


def pytorch_at(t, cap, same_precision):
    return [p for p in runs if p["impl"] == "pytorch" and p["model"] == t["model"] and p["threads"] == t["threads"]
            and p.get("cpu_cap", "native") == cap and (not same_precision or precision(p) == precision(t))]


# Each Tessera row against the fastest PyTorch at the same level and precision.
print(f"{'model':<12} {'thr':>3} {'tessera level':<14} {'prec':<5} {'tok/s':>8} {'best pytorch, same precision':<30} "
      f"{'tok/s':>8} {'ratio':>6} {'% peak':>7} {'target':>6} {'needs % peak':>12} {'RSS MiB T/P':>12}")
best_setups = {}
for t in (r for r in runs if r["impl"] == "tessera"):
    # A forced avx2 below the native level meets PyTorch capped at AVX2 too; every other level, PyTorch as is.
    cap = "avx2" if t["cpu_isa"] == "avx2" and auto_isa != "avx2" else "native"
    same = pytorch_at(t, cap, same_precision=True)
    if not same:
        continue
    best = max(same, key=lambda p: p["tokens_per_s"])
    ratio = t["tokens_per_s"] / best["tokens_per_s"]
    target = TARGETS.get(t["model"], 1.5)
    needs = needs_peak(t, target, best)
    rows.append({"tessera": t, "precision": precision(t), "pytorch_best": best, "pytorch_all": same, "ratio": ratio,
                 "target_ratio": target, "target_needs_peak_fraction": needs})
    print(f"{t['model']:<12} {t['threads']:>3} {t['cpu_isa']:<14} {precision(t):<5} {t['tokens_per_s']:>8.0f} "
          f"{pytorch_name(best):<30} {best['tokens_per_s']:>8.0f} {ratio:>6.2f} {100*t['gflops']/peak(t):>6.1f}% {target:>5.1f}x "
          f"{100*needs:>11.1f}% {t['peak_rss_mb']:>5.0f}/{best['peak_rss_mb']:<6.0f}")
    key = (t["model"], t["threads"], cap)
    if key not in best_setups or t["tokens_per_s"] > best_setups[key]["tokens_per_s"]:
        best_setups[key] = t
# Each framework's best setup, any precision (the issue's "PyTorch's best setup"), per model, threads and level.
print("best setup against best setup (any precision):")
setups = []
for (model, threads, cap), t in best_setups.items():
    best = max(pytorch_at(t, cap, same_precision=False), key=lambda p: p["tokens_per_s"])
    ratio, target = t["tokens_per_s"] / best["tokens_per_s"], TARGETS.get(model, 1.5)
    setups.append({"model": model, "threads": threads, "cpu_cap": cap, "tessera": t, "pytorch_best": best,
                   "ratio": ratio, "target_ratio": target, "target_met": ratio >= target})
    print(f"  {model:<12} {threads:>3} {cap:<7} tessera {t['cpu_isa']} {precision(t)} {t['tokens_per_s']:.0f} tok/s "
          f"against {pytorch_name(best)} {best['tokens_per_s']:.0f} tok/s: {ratio:.2f}x "
          f"(target {target:.1f}x {'met' if ratio >= target else 'not met'})")
print("every PyTorch variant (tok/s):")
for p in (r for r in runs if r["impl"] == "pytorch"):
    print(f"  {p['model']:<12} {p['threads']:>3} torch {p['torch']:<16} {p.get('attention', 'manual'):<7} "
          f"{'compile' if p.get('compiled') else 'eager':<8} {precision(p):<5} {p.get('cpu_cap', 'native'):<7} "
          f"{p['tokens_per_s']:>8.0f}")
json.dump({"same_precision": rows, "best_setups": setups}, open(out, "w"), indent=1)
PY
