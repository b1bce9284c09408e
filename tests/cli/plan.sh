# `tessera plan` on tests/configs/tiny.toml: the per-rank table, grouping of ranks of one kind, --ranks,
# the budget verdict with the changes that fit, --json, errors; and a dp-only run's measured peak
# (metrics.jsonl "mem") equals the plan to the byte.
# Usage: plan.sh TESSERA SOURCE_DIR
source "$(dirname "$0")/lib.sh"

plan() { "$TESSERA" plan --config "$CONFIG" "$@"; }
expect_in() {  # expect_in NAME TEXT PATTERN...
  local name=$1 text=$2
  shift 2
  for p in "$@"; do grep -qF -- "$p" <<<"$text" || fail "$name: output does not contain '$p': $text"; done
  echo "ok: $name"
}

out=$(plan) || fail "plan of tiny.toml failed: $out"
expect_in "one rank" "$out" "tessera plan: tiny" "parameters" "gradients" "optimizer" "activations" \
  "communication" "workspace" "total" "budget: none"
grep -qE '^0 +0 +\[0,2\)x1 ' <<<"$out" || fail "no row for rank 0 with its chunk: $out"

out=$(plan --ranks 2 train.batch_tokens=512) || fail "--ranks 2: $out"
expect_in "--ranks sets dp" "$out" "parallel.dp = 2" "dp=2 tp=1 pp=1"
grep -qE '^0,1 ' <<<"$out" || fail "the two identical dp ranks should print once as 0,1: $out"

out=$(plan parallel.tp=2 parallel.pp=2 parallel.dp=2 train.batch_tokens=1024) || fail "3D: $out"
for kind in '0,4 +0/tp0' '1,5 +0/tp1' '2,6 +1/tp0' '3,7 +1/tp1'; do
  grep -qE "^$kind " <<<"$out" || fail "3D: no row '$kind': $out"
done
echo "ok: 3D layout prints one row per stage and tp rank"

out=$(plan train.memory_budget_mb=4.5) || fail "over budget: $out"
expect_in "over budget" "$out" "OVER on rank 0" "single changes that fit" "train.recompute=full"

out=$(plan train.memory_budget_mb=100) || fail "within budget: $out"
expect_in "within budget" "$out" "fits" "largest micro_batch that fits: 4"

plan --json parallel.tp=2 parallel.sequence_parallel=true >plan.json || fail "--json"
/usr/bin/python3 - plan.json <<'PY' || fail "--json output"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["world_size"] == 2 and len(p["ranks"]) == 2, p
for r in p["ranks"]:
    assert sum(r["at_peak"].values()) == r["peak"], r
    assert r["peak"] > 0 and r["category_peak"]["activations"] >= r["at_peak"]["activations"], r
PY
echo "ok: --json"

expect_error "unknown key" "bogus|[train]" -- plan train.bogus=1
expect_error "--ranks not a multiple of tp x pp" "--ranks 3|parallel.tp" -- plan parallel.tp=2 --ranks 3
expect_error "impossible layout" "parallel.tp" -- plan parallel.tp=3 --ranks 3

# The prediction is the allocator's count: a dp-only run measures exactly the planned peak.
make_dataset ds 60
tiny_train run ds train.steps=2 --quiet || fail "training run"
"$TESSERA" plan --config "$CONFIG" "${TINY[@]}" data.dir=ds --json >p.json || fail "plan of the run"
/usr/bin/python3 - p.json run/metrics.jsonl <<'PY' || fail "predicted and measured peak differ"
import json, sys
plan = json.load(open(sys.argv[1]))
mem = [json.loads(l)["mem"] for l in open(sys.argv[2]) if '"mem"' in l][-1]
pred, meas = plan["ranks"][0]["peak"], mem[0]["total"]["peak"]
print(f"predicted {pred} bytes, measured {meas} bytes")
assert pred == meas
PY

# tessera train refuses a run over its budget before allocating anything or creating its run directory.
out=$(tiny_train over_budget ds train.memory_budget_mb=1.4 2>&1) && fail "training over budget started: $out"
expect_in "train refuses over budget" "$out" "train.memory_budget_mb = 1.4" "is predicted to peak at" \
  "these single changes fit"
[ ! -e over_budget ] || fail "a refused run left its directory behind"
echo PASS
