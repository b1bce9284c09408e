#!/usr/bin/env bash
# The GPU check of the CUDA backend, one visit: on a machine with an NVIDIA GPU, the CUDA toolkit and
# driver, from a bundle made by tools/gpu_bundle.sh on the build machine. It runs
#   1. every op of the CUDA backend against the CPU oracle, twice (determinism)   CrossBackendOps.*
#   2. 20-step training of tiny GPT-2 / LLaMA (tied, untied; fp32, bf16) against the CPU     CudaTraining.*
#   3. the op test under compute-sanitizer memcheck
#   4. the NCCL communicator against MPI at world size 1 (test_mpi_comm NcclComm.*), `tessera train`
#      of configs/tiny.toml on the GPU for a few steps, and the step benchmark
#      (bench_train_step --device cuda) of bench-small and gpt2 beside PyTorch's on the same GPU
#      (tools/bench_pytorch.py: eager, and sdpa + torch.compile) -- when the machine's glibc runs the
#      bundle natively: Open MPI's orted (a singleton MPI_Init starts it) cannot use the carried loader
# and writes $OUT_DIR/gpu_check.json (each step's exit status, time, gtest results, output tail).
# Steps run in order of importance; one whose start would pass the visit's budget is skipped (and
# listed as skipped), so the JSON always comes back.
# Usage: tools/gpu_check.sh BUNDLE.tar.xz OUT_DIR [SECONDS_PER_STEP] [SECONDS_IN_ALL]
set -uo pipefail
BUNDLE=${1:?usage: tools/gpu_check.sh BUNDLE.tar.xz OUT_DIR}
OUT_DIR=${2:?usage: tools/gpu_check.sh BUNDLE.tar.xz OUT_DIR}
LIMIT=${3:-150}
BUDGET=${4:-540}
REPO=$(cd "$(dirname "$0")/.." && pwd)
export PATH=/usr/local/cuda/bin:$PATH  # compute-sanitizer, nvidia-smi
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
B=$(mktemp -d)
tar -C "$B" -xJf "$BUNDLE" || { echo "error: cannot unpack $BUNDLE" >&2; exit 2; }

# CUDA's libraries on this machine: the toolkit's, or a pip wheel's (nvidia-cublas).
cuda_libs=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64 \
         $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, q, "lib") for p in nvidia.__path__ for q in os.listdir(p)))' 2>/dev/null); do
  [[ -e $d/libcublas.so.13 || -e $d/libcudart.so.13 || -e $d/libnccl.so.2 ]] && cuda_libs="$cuda_libs:$d"
done
if [[ -z $cuda_libs ]]; then  # elsewhere on the machine
  for f in $(find /usr /opt -maxdepth 7 \( -name libcublas.so.13 -o -name libcudart.so.13 -o -name libnccl.so.2 \) 2>/dev/null); do
    cuda_libs="$cuda_libs:$(dirname "$f")"
  done
fi
driver_libs=$(dirname "$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 / {print $NF; exit}')" 2>/dev/null)
export TESSERA_CUDA_PLUGIN=$B/lib/tessera/libtessera_cuda.so TESSERA_NCCL_PLUGIN=$B/lib/tessera/libtessera_nccl.so
ours=$(cat "$B/GLIBC_VERSION")
theirs=$(ldd --version 2>/dev/null | awk 'NR == 1 {print $NF}')
native=0
[[ $(printf '%s\n%s\n' "$ours" "$theirs" | sort -V | head -1) == "$ours" ]] && native=1
[[ ${TESSERA_GPU_CHECK_LOADER:-0} == 1 ]] && native=0  # force the carried loader (to test it)
libpath="$B/lib$cuda_libs:${driver_libs:-/usr/lib/x86_64-linux-gnu}"
# $B/run PROGRAM ARGS...: natively where this glibc is new enough, else through the carried loader.
if [[ $native == 1 ]]; then
  printf '#!/bin/sh\np=$1; shift\nLD_LIBRARY_PATH=%s exec %s/bin/"$p" "$@"\n' "$libpath" "$B" >"$B/run"
else
  printf '#!/bin/sh\np=$1; shift\nexec %s/glibc/ld-linux-x86-64.so.2 --library-path %s %s/bin/"$p" "$@"\n' \
    "$B" "$B/glibc:$libpath" "$B" >"$B/run"
fi
chmod +x "$B/run"
run="$B/run"

declare -a steps=()
step() {  # step NAME COMMAND...: runs it with the time limit, keeps rc, seconds and the output's tail
  local name=$1; shift
  local t0=$SECONDS rc=0
  if (( SECONDS + 20 > BUDGET )); then
    echo "skipped: the visit's budget of $BUDGET s was spent" >"$OUT_DIR/$name.log"
    steps+=("$name -1 0")
    return
  fi
  local limit=$(( BUDGET - SECONDS < LIMIT ? BUDGET - SECONDS : LIMIT ))
  timeout "$limit" "$@" >"$OUT_DIR/$name.log" 2>&1 || rc=$?
  echo "[gpu_check] $name: rc $rc in $((SECONDS - t0)) s"
  steps+=("$name $rc $((SECONDS - t0))")
}

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv >"$OUT_DIR/nvidia_smi.csv" 2>&1
step version "$run" tessera --version
step ops "$run" test_backend --gtest_filter='CrossBackendOps.*:Backend.*:BackendMemory.*' \
  --gtest_output=json:"$OUT_DIR/ops.json"
step training "$run" test_backend --gtest_filter='*CudaTraining.*' --gtest_output=json:"$OUT_DIR/training.json"
if command -v compute-sanitizer >/dev/null; then
  step memcheck compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$run" test_backend --gtest_filter='CrossBackendOps.EveryOpOfTheCudaBackend*'
fi
if [[ $native == 1 && -x $B/ompi/bin/orted ]]; then
  export OPAL_PREFIX=$B/ompi PATH=$B/ompi/bin:$PATH OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  W=$(mktemp -d)
  cat "$REPO"/README.md "$REPO"/docs/*.md >"$W/corpus.txt"
  step train_prepare "$run" tessera prepare "$W/corpus.txt" --out "$W/data"
  step nccl env LD_LIBRARY_PATH="$libpath" "$B/ompi/bin/mpirun" -np 1 -x LD_LIBRARY_PATH -x TESSERA_CUDA_PLUGIN -x TESSERA_NCCL_PLUGIN \
    "$B/bin/test_mpi_comm" --gtest_filter='NcclComm.*:StagedComm.*' --gtest_output=json:"$OUT_DIR/nccl.json"
  step train_cuda "$run" tessera train --config "$REPO/configs/tiny.toml" data.dir="$W/data" \
    train.out_dir="$W/run" train.steps=20 train.device=cuda
  for shape in "bench-small 8 512" "gpt2 4 1024"; do
    read -r model batch seq <<<"$shape"
    step "bench_${model}_tessera" "$run" bench_train_step --device cuda --model "$model" --batch "$batch" \
      --seq "$seq" --steps 5 --json "$OUT_DIR/bench_${model}_tessera.json"
    step "bench_${model}_pytorch_eager" python3 "$REPO/tools/bench_pytorch.py" --device cuda --model "$model" \
      --batch "$batch" --seq "$seq" --steps 5
    step "bench_${model}_pytorch_compiled" python3 "$REPO/tools/bench_pytorch.py" --device cuda --model "$model" \
      --batch "$batch" --seq "$seq" --steps 5 --attention sdpa --compile
  done
fi

python3 - "$OUT_DIR" "$native" "${steps[@]}" <<'PY'
import json, os, sys
out, native, rows = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
summary = {"native_glibc": native, "steps": {}}
for row in rows:
    name, rc, secs = row.split()
    log = open(os.path.join(out, name + ".log"), errors="replace").read()
    entry = {"rc": int(rc), "seconds": int(secs), "tail": log[-4000:]}
    gtest = os.path.join(out, name + ".json")
    if os.path.exists(gtest):
        g = json.load(open(gtest))
        entry["tests"], entry["failures"] = g.get("tests"), g.get("failures")
        entry["failed"] = [f"{s['name']}.{t['name']}: " + " | ".join(x["failure"][:600] for x in t.get("failures", []))
                           for s in g["testsuites"] for t in s["testsuite"] if t.get("failures")]
    summary["steps"][name] = entry
json.dump(summary, open(os.path.join(out, "gpu_check.json"), "w"), indent=1)
print(json.dumps({k: {"rc": v["rc"], "s": v["seconds"], "failures": v.get("failures")} for k, v in summary["steps"].items()}))
PY
