#!/usr/bin/env bash
# Model-parallel layouts side by side on the same global batch (bench-small, micro_batch 4, seq_len 128,
# 4 micro-batches per step = 2048 tokens), 1 thread per rank:
#   1 rank (reference) | tp=2 | tp=2 + sequence_parallel | pp=2 gpipe | pp=2 1f1b | pp=2 interleaved V=2
#   (automatic split, and stage_layers=2,1,2,1, which balances the two ranks' total work) | pp=2 zb-h1 | dp=2
# Per layout: step time (median of the per-step times in metrics.jsonl, first step excluded, in the best
# of REPS interleaved repetitions: on a shared machine noise only ever slows a run), tokens/s and the ratio
# to 1 rank; the trainer's "done:" tok/s per rep;
# rank 0's tracked memory (metrics mem_mb) and every rank's peak RSS (/usr/bin/time %M). The pipeline runs
# are traced (--trace): per stage, the share of the step spent in "recv activation"/"recv gradient"
# (waiting = bubble + communication), in "grad sync wait" (the last stage's tail of the bubble shows up
# there: the tied-embedding gradient waits for stage 0's last backward) and not computing (the bubble
# as measured: 1 - forward/backward/optimizer share), against the ideal bubble (p-1)/(m+p-1)
# (gpipe, 1f1b), (p-1)/(V*m+p-1) (interleaved) or (p-1)/(3m+p-1) (zb-h1, its three passes costing the
# same), m = train.grad_accum, with zb-h1's idle time per step against 1F1B's; and the overhead against a
# perfect split of the 1-rank step, 1 - T1 / (p * Tpp).
# Writes bench/results/model_parallel.json (+ the rep-1 pipeline traces) and prints a table.
# Usage: bench/model_parallel.sh [build_dir] [steps]
#   (env: MODEL=bench-small SEQ=128 MB=4 ACCUM=4 REPS=2 BIND=core TIMEOUT=180; ONLY=<regex>: those labels only;
#    EXTRA="model.n_layer=12": overrides for every layout; SPLIT=2,3,6,1: also interleaved with that split; RESULT=name: bench/results/<name>.json and
#    <name>_trace_<label>.json instead of model_parallel;
#    TABLE_ONLY=1 re-derives the table and summary from the runs stored in the JSON, running nothing)
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
BUILD=$(bench_build_dir "${1:-build}")
STEPS=${2:-12}
MODEL=${MODEL:-bench-small}; SEQ=${SEQ:-128}; MB=${MB:-4}; ACCUM=${ACCUM:-4}; REPS=${REPS:-2}
BIND=${BIND:-core}; TIMEOUT=${TIMEOUT:-180}
HERE=$(cd "$(dirname "$0")/.." && pwd)
OUT=$HERE/bench/results
RESULT=${RESULT:-model_parallel}
EXTRA=${EXTRA:-}
TESSERA=$(cd "$BUILD" && pwd)/src/cli/tessera
GLOBAL=$((MB * SEQ * ACCUM))  # tokens per step, every layout
mkdir -p "$OUT"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
: > "$TMP/runs.txt"
if [[ ${TABLE_ONLY:-0} == 1 ]]; then REPS=0; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[[ $REPS == 0 ]] || "$TESSERA" prepare --kjv --tokenizer byte --out "$TMP/kjv" >/dev/null
# Every rank under /usr/bin/time: peak RSS in KiB to $MEMOUT.rank<r>.
cat > "$TMP/memwrap.sh" <<'SH'
#!/bin/sh
exec /usr/bin/time -f %M -o "$MEMOUT.rank${OMPI_COMM_WORLD_RANK:-0}" "$@"
SH
chmod +x "$TMP/memwrap.sh"

LAYOUTS=(  # label|ranks|overrides
  "1rank|1|"
  "tp2|2|parallel.tp=2"
  "tp2_sp|2|parallel.tp=2 parallel.sequence_parallel=true"
  "pp2_gpipe|2|parallel.pp=2 parallel.schedule=gpipe"
  "pp2_1f1b|2|parallel.pp=2 parallel.schedule=1f1b"
  "pp2_interleaved_v2|2|parallel.pp=2 parallel.schedule=interleaved parallel.virtual_stages=2"
  "pp2_interleaved_v2_2121|2|parallel.pp=2 parallel.schedule=interleaved parallel.virtual_stages=2 parallel.stage_layers=2,1,2,1"
  "pp2_zb_h1|2|parallel.pp=2 parallel.schedule=zb-h1"
  "dp2|2|parallel.dp=2"
)
# SPLIT=2,3,6,1: the interleaved layout once more with that split by hand, next to the automatic one.
[[ -z ${SPLIT:-} ]] || LAYOUTS+=("pp2_interleaved_v2_split_${SPLIT//,/}|2|parallel.pp=2 parallel.schedule=interleaved parallel.virtual_stages=2 parallel.stage_layers=$SPLIT")
for rep in $(seq 1 "$REPS"); do
  for entry in "${LAYOUTS[@]}"; do
    IFS='|' read -r label np over <<< "$entry"
    [[ $label =~ ${ONLY:-.} ]] || continue
    run=$TMP/${label}_r$rep
    trace=()
    [[ $label == pp* ]] && trace=(--trace "$run.trace.json")
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086  # $over is a list of overrides
    if timeout "$TIMEOUT" mpirun --allow-run-as-root --oversubscribe --bind-to "$BIND" -np "$np" -x MEMOUT="$run.mem" \
        "$TMP/memwrap.sh" "$TESSERA" train --config "$HERE/tests/configs/tiny.toml" model.preset="$MODEL" \
        data.dir="$TMP/kjv" data.seq_len="$SEQ" train.threads=1 train.micro_batch="$MB" train.batch_tokens="$GLOBAL" \
        train.steps="$STEPS" train.eval_interval=0 train.log_interval=1 train.timeout_s=120 \
        train.out_dir="$run.out" $EXTRA $over "${trace[@]}" > "$run.log" 2>&1; then rc=0; else rc=$?; fi
    wall=$(echo "$(date +%s.%N) - $t0" | bc)
    done_line=$(tr '\r' '\n' < "$run.log" | grep '^done:' || true)
    printf 'rep %s %-24s rc %s, %5.1f s  %s\n' "$rep" "$label" "$rc" "$wall" "${done_line:-(no done line)}" >&2
    [[ $rc == 0 ]] || tr '\r' '\n' < "$run.log" | tail -5 | sed 's/^/    /' >&2
    echo "$label $rep $np $rc $wall $run" >> "$TMP/runs.txt"
    if [[ $rep == 1 && $label == pp* && -f $run.trace.json ]]; then cp "$run.trace.json" "$OUT/${RESULT}_trace_$label.json"; fi
  done
done

/usr/bin/python3 - "$OUT/$RESULT.json" "$TMP/runs.txt" "$MODEL" "$SEQ" "$MB" "$ACCUM" "$STEPS" "$BIND" "${TABLE_ONLY:-0}" <<'PY'
import glob, json, re, statistics, sys
out, runs_txt, model, seq, mb, accum, steps, bind, table_only = sys.argv[1:10]
seq, mb, accum, steps = int(seq), int(mb), int(accum), int(steps)
stored = None
if table_only == "1":  # the runs of the last full invocation, with its settings
    stored = json.load(open(out))
    model, seq, mb, accum, steps, bind = (stored[k] for k in ("model", "seq_len", "micro_batch", "micro_batches", "steps", "bind"))
tokens = mb * seq * accum

def union(spans):
    res = []
    for a, b in sorted(spans):
        if res and a <= res[-1][1]: res[-1][1] = max(res[-1][1], b)
        else: res.append([a, b])
    return res

def length(spans): return sum(b - a for a, b in spans)

def pipeline_waits(path):
    """Per rank, over steps 2..N (a step ends with its "optimizer" span): mean step ms, the share in
    recv activation/gradient spans, the share in forward/backward/optimizer (compute)."""
    ev = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    res = {}
    for r in sorted({e["pid"] for e in ev}):
        mine = [e for e in ev if e["pid"] == r]
        ends = sorted(e["ts"] + e["dur"] for e in mine if e["name"] == "optimizer")
        step_us = recv_us = comp_us = sync_us = 0.0
        for a, b in zip(ends, ends[1:]):  # windows of steps 2..N
            inside = [e for e in mine if a < e["ts"] <= b]
            sp = lambda names: union([(e["ts"], min(b, e["ts"] + e["dur"])) for e in inside if e["name"] in names])
            step_us += b - a
            recv_us += length(sp({"recv activation", "recv gradient"}))
            comp_us += length(sp({"forward", "backward", "backward weights", "optimizer"}))
            sync_us += length(sp({"grad sync wait"}))
        n = max(1, len(ends) - 1)
        res[r] = {"step_ms": step_us / n / 1e3, "idle_ms": (step_us - comp_us) / n / 1e3,
                  "recv_wait_share": recv_us / step_us if step_us else None,
                  "compute_share": comp_us / step_us if step_us else None,
                  "grad_sync_wait_share": sync_us / step_us if step_us else None,
                  "not_computing_share": 1 - comp_us / step_us if step_us else None, "steps_used": len(ends) - 1}
    return res

runs = {row["label"]: row["runs"] for row in stored["layouts"]} if stored else {}
for line in open(runs_txt):
    label, rep, np_, rc, wall, base = line.split()
    r = {"rep": int(rep), "ranks": int(np_), "rc": int(rc), "wall_s": float(wall)}
    log = open(base + ".log", errors="replace").read().replace("\r", "\n")
    m = re.search(r"^done: .* ([0-9.]+) tok/s", log, re.M)
    r["done_tok_s"] = float(m.group(1)) if m else None
    m = re.search(r"^tessera: layout (.*)$", log, re.M)
    r["layout"] = m.group(1) if m else None
    r["errors"] = [l for l in log.splitlines() if re.search(r"error|abort|timed out|fatal", l, re.I)][:5]
    try:
        ms = [json.loads(l) for l in open(base + ".out/metrics.jsonl") if '"step"' in l]
        ms = [x for x in ms if "time_s" in x]
        t = [x["time_s"] for x in ms]
        r["step_s"] = [b - a for a, b in zip(t, t[1:])]  # steps 2..N
        r["mem_mb_rank0"] = max(x["mem_mb"] for x in ms)
        r["loss_last"] = ms[-1]["loss"]
    except (OSError, ValueError, KeyError):
        r["step_s"], r["mem_mb_rank0"], r["loss_last"] = [], None, None
    rss = {}
    for f in glob.glob(base + ".mem.rank*"):
        txt = open(f).read().split()
        if txt and txt[-1].isdigit(): rss[int(f.rsplit("rank", 1)[1])] = int(txt[-1]) / 1024
    r["peak_rss_mb"] = [rss[k] for k in sorted(rss)]
    tr = base + ".trace.json"
    if glob.glob(tr):
        try: r["pipeline"] = pipeline_waits(tr)
        except (OSError, ValueError, KeyError) as e: r["pipeline"] = {"error": str(e)}
    runs.setdefault(label, []).append(r)

def ideal_bubble(label, p=2):
    if label.startswith("pp2_interleaved"): return (p - 1) / (2 * accum + p - 1)
    if label.startswith("pp2_zb"): return (p - 1) / (3 * accum + p - 1)
    if label.startswith("pp2"): return (p - 1) / (accum + p - 1)
    return None

rows = []
for label, rs in runs.items():
    for r in rs: r["step_ms_median"] = statistics.median(r["step_s"]) * 1e3 if r["step_s"] else None
    timed = [r for r in rs if r["step_ms_median"]]
    best = min(timed, key=lambda r: r["step_ms_median"]) if timed else None
    med = best["step_ms_median"] / 1e3 if best else None
    steps_all = [s for r in rs for s in r["step_s"]]
    row = {"label": label, "ranks": rs[0]["ranks"], "layout": rs[0]["layout"], "failed_reps": sum(r["rc"] != 0 for r in rs),
           "best_rep": best["rep"] if best else None,
           "step_ms_median": med * 1e3 if med else None,  # the best rep's median
           "step_ms_median_per_rep": [r["step_ms_median"] for r in rs],
           "step_ms_median_pooled": statistics.median(steps_all) * 1e3 if steps_all else None,
           "step_ms_min": min(steps_all) * 1e3 if steps_all else None,
           "step_ms_max": max(steps_all) * 1e3 if steps_all else None,
           "tokens_per_s": tokens / med if med else None,
           "done_tok_s": [r["done_tok_s"] for r in rs],
           "mem_mb_rank0": rs[0]["mem_mb_rank0"],
           "peak_rss_mb": [max(r["peak_rss_mb"][i] for r in rs if len(r["peak_rss_mb"]) > i)
                           for i in range(max(len(r["peak_rss_mb"]) for r in rs))],
           "loss_last": [r["loss_last"] for r in rs], "ideal_bubble": ideal_bubble(label), "runs": rs}
    pipes = [r["pipeline"] for r in ([best] if best else []) if isinstance(r.get("pipeline"), dict) and "error" not in r["pipeline"]]
    if pipes:
        row["stage_recv_wait_share"] = [statistics.mean(p[k]["recv_wait_share"] for p in pipes) for k in sorted(pipes[0])]
        row["stage_grad_sync_wait_share"] = [statistics.mean(p[k]["grad_sync_wait_share"] for p in pipes)
                                             for k in sorted(pipes[0])]
        row["stage_not_computing_share"] = [statistics.mean(p[k]["not_computing_share"] for p in pipes)
                                            for k in sorted(pipes[0])]
        row["stage_idle_ms"] = [statistics.mean(p[k].get("idle_ms", 0.0) for p in pipes) for k in sorted(pipes[0])]
    rows.append(row)
ref = next((r for r in rows if r["label"] == "1rank"), None)
for row in rows:
    if ref and ref["step_ms_median"] and row["step_ms_median"]:
        row["speedup_vs_1rank"] = ref["step_ms_median"] / row["step_ms_median"]
        if row["label"].startswith("pp2"):
            row["overhead_vs_perfect_split"] = 1 - ref["step_ms_median"] / (2 * row["step_ms_median"])

f = lambda v, spec: format(v, spec) if v is not None else "-"
pct = lambda v: f"{100 * v:.0f}%" if v is not None else "-"
print(f"\n{model}, micro_batch {mb}, seq_len {seq}, {accum} micro-batches/step ({tokens} tokens), {steps} steps, "
      f"1 thread/rank, --bind-to {bind}; step time = median over steps 2..{steps} of the best of {max(len(v) for v in runs.values())} reps")
W = max(len(r["label"]) for r in rows)
stages = lambda r, k: "/".join(pct(x) for x in r.get(k, [])) or "-"
print(f"{'layout':<{W}} {'step ms':>8} {'tok/s':>7} {'vs 1':>5} {'done tok/s':>10} {'mem MiB r0':>10} "
      f"{'peak RSS MiB/rank':>17} {'ideal bubble':>12} {'idle/stage':>10} {'recv/stage':>10} {'sync/stage':>10} "
      f"{'vs perfect':>10}")
for r in rows:
    print(f"{r['label']:<{W}} {f(r['step_ms_median'], '.0f'):>8} {f(r['tokens_per_s'], '.0f'):>7} "
          f"{f(r.get('speedup_vs_1rank'), '.2f'):>5} {'/'.join(f(x, '.0f') for x in r['done_tok_s']):>10} "
          f"{f(r['mem_mb_rank0'], '.0f'):>10} {'/'.join(f(x, '.0f') for x in r['peak_rss_mb']):>17} "
          f"{pct(r['ideal_bubble']):>12} {stages(r, 'stage_not_computing_share'):>10} "
          f"{stages(r, 'stage_recv_wait_share'):>10} {stages(r, 'stage_grad_sync_wait_share'):>10} "
          f"{pct(r.get('overhead_vs_perfect_split')):>10}"
          + (f"  FAILED {r['failed_reps']} rep(s)" if r["failed_reps"] else ""))
print("vs 1 = 1-rank step / layout step; done tok/s = the trainer's done line, per rep; mem MiB r0 = rank 0's tracked\n"
      "buffers (metrics mem_mb; other ranks log none); per stage (pipeline runs, traced, steps 2..N): idle = not in\n"
      "forward/backward/optimizer, recv = in recv activation/gradient, sync = in grad sync wait (best rep); vs perfect =\n"
      "1 - T1/(2 T), the pipeline's overhead against a perfect 2-way split of the 1-rank step")
by = {r["label"]: r for r in rows}
if "pp2_zb_h1" in by and "pp2_1f1b" in by and by["pp2_1f1b"].get("stage_idle_ms") and by["pp2_zb_h1"].get("stage_idle_ms"):
    zb, ob = sum(by["pp2_zb_h1"]["stage_idle_ms"]), sum(by["pp2_1f1b"]["stage_idle_ms"])
    by["pp2_zb_h1"]["idle_vs_1f1b"] = zb / ob if ob else None
    print(f"zb-h1 idle time per step (sum over stages) {zb:.1f} ms against 1f1b's {ob:.1f} ms: "
          f"{zb / ob:.2f}x (ideal 1/3 with equal pass costs); peak RSS per rank zb-h1 "
          f"{'/'.join(f(x, '.0f') for x in by['pp2_zb_h1']['peak_rss_mb'])} MiB, 1f1b "
          f"{'/'.join(f(x, '.0f') for x in by['pp2_1f1b']['peak_rss_mb'])} MiB")
losses = {r["label"]: r["loss_last"] for r in rows}
if len({round(x, 3) for v in losses.values() for x in v if x is not None}) > 1:
    print("note: last-step losses differ between layouts:", losses)
json.dump({"model": model, "seq_len": seq, "micro_batch": mb, "micro_batches": accum, "global_tokens": tokens,
           "steps": steps, "bind": bind, "threads_per_rank": 1, "layouts": rows}, open(out, "w"), indent=1)
print(f"-> {out}")
PY
