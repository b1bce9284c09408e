#!/usr/bin/env bash
# Gradient compression benchmark: the same data-parallel job (bench-small, NP ranks x 1 thread, same
# steps and data) once per comm.compression method, plain all-reduce ("none") first as the
# reference. Per method: data-parallel bytes sent per step and rank (the communicator's ring model,
# from the done line), compression ratio vs none, validation loss after the last step, time per step
# (tokens per step / tok/s; first step excluded by the trainer). Writes bench/results/compression.json.
# Usage: bench/compression.sh [build_dir] [steps]
#   env: NP=2 MB=4 SEQ=256 MODEL=bench-small EVAL_BATCHES=8 TOPK=0.01 RANK=4 BIND=core
#        METHODS="none bf16 topk powersgd onebit"  MPIRUN_ARGS="..." (extra mpirun arguments, e.g.
#        "--mca btl tcp,self" or -x VAR for a throttled-network bed)  OUT_JSON=... (result file)
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
STEPS=${2:-30}
NP=${NP:-2}; MB=${MB:-4}; SEQ=${SEQ:-256}; MODEL=${MODEL:-bench-small}; EVAL_BATCHES=${EVAL_BATCHES:-8}
TOPK=${TOPK:-0.01}; RANK=${RANK:-4}; BIND=${BIND:-core}
METHODS=${METHODS:-none bf16 topk powersgd onebit}
HERE=$(cd "$(dirname "$0")/.." && pwd)
OUT_JSON=${OUT_JSON:-$HERE/bench/results/compression.json}
TESSERA=$BUILD/src/cli/tessera
mkdir -p "$(dirname "$OUT_JSON")"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
"$TESSERA" prepare --kjv --tokenizer byte --out "$TMP/kjv" >/dev/null
ROWS=()
for m in $METHODS; do
  # shellcheck disable=SC2086  # MPIRUN_ARGS is a list of arguments
  mpirun --allow-run-as-root --oversubscribe --bind-to "$BIND" ${MPIRUN_ARGS:-} -np "$NP" "$TESSERA" train \
    --config "$HERE/tests/configs/tiny.toml" model.preset="$MODEL" data.dir="$TMP/kjv" data.seq_len="$SEQ" \
    parallel.dp="$NP" train.threads=1 train.micro_batch="$MB" train.batch_tokens=$((MB * SEQ * NP)) \
    train.steps="$STEPS" train.eval_interval="$STEPS" train.eval_batches="$EVAL_BATCHES" train.log_interval=1000 \
    train.timeout_s=600 comm.compression="$m" comm.topk_ratio="$TOPK" comm.powersgd_rank="$RANK" \
    train.out_dir="$TMP/$m" > "$TMP/$m.log"
  done_line=$(grep '^done:' "$TMP/$m.log")
  tok_s=$(echo "$done_line" | sed -E 's/.* ([0-9.]+) tok\/s.*/\1/')
  mib=$(echo "$done_line" | sed -E 's/.*data-parallel traffic ([0-9.]+) MiB\/step.*/\1/')
  val=$(/usr/bin/python3 -c "import json,sys; print([e['val_loss'] for e in map(json.loads, open(sys.argv[1])) if 'val_loss' in e][-1])" "$TMP/$m/metrics.jsonl")
  echo "$m: $tok_s tok/s, $mib MiB/step, val loss $val" >&2
  ROWS+=("$m" "$tok_s" "$mib" "$val")
done
/usr/bin/python3 - "$OUT_JSON" "$MODEL" "$NP" "$MB" "$SEQ" "$STEPS" "$TOPK" "$RANK" "${MPIRUN_ARGS:-}" "${ROWS[@]}" <<'PY'
import json, sys
out, model, np_, mb, seq, steps, topk, rank, mpirun_args = sys.argv[1:10]
v = sys.argv[10:]
rows = [dict(method=v[i], tok_s=float(v[i + 1]), mib_per_step=float(v[i + 2]), val_loss=float(v[i + 3]))
        for i in range(0, len(v), 4)]
tokens = int(mb) * int(seq) * int(np_)
ref = next((r for r in rows if r["method"] == "none"), rows[0])
for r in rows:
    r["s_per_step"] = tokens / r["tok_s"]
    r["ratio_vs_none"] = ref["mib_per_step"] / r["mib_per_step"] if r["mib_per_step"] > 0 else float("inf")
    r["speedup_vs_none"] = ref["s_per_step"] / r["s_per_step"]
    r["val_loss_vs_none"] = r["val_loss"] / ref["val_loss"] - 1
print(f"\n{'method':>9} {'MiB/step':>9} {'ratio':>7} {'val loss':>9} {'vs none':>8} {'s/step':>7} {'speed-up':>8}")
for r in rows:
    print(f"{r['method']:>9} {r['mib_per_step']:>9.3f} {r['ratio_vs_none']:>6.1f}x {r['val_loss']:>9.4f} "
          f"{100 * r['val_loss_vs_none']:>+7.2f}% {r['s_per_step']:>7.3f} {r['speedup_vs_none']:>7.2f}x")
print(f"({model}, {np_} ranks x 1 thread, micro_batch {mb}, seq_len {seq}, {steps} steps, topk_ratio {topk}, "
      f"powersgd_rank {rank}; MiB/step: data-parallel bytes sent per rank, ring model{'; mpirun ' + mpirun_args if mpirun_args else ''})")
json.dump({"model": model, "ranks": int(np_), "micro_batch": int(mb), "seq_len": int(seq), "steps": int(steps),
           "topk_ratio": float(topk), "powersgd_rank": int(rank), "mpirun_args": mpirun_args, "rows": rows},
          open(out, "w"), indent=1)
PY
