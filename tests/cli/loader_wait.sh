# The trainer reports how much of the step time went to waiting for data: the final line
# "done: N steps, X tok/s, loader wait Y% of step time, ..." is printed and parses (no timing is
# asserted: the machine is shared). Also: --trace writes a Chrome trace with the data/compute spans.
# Usage: loader_wait.sh TESSERA SOURCE_DIR
source "$(dirname "$0")/lib.sh"

make_dataset ds 60
out=$(tiny_train run ds train.steps=5 --trace trace.json) || fail "training"
echo "$out" | tail -2
line=$(grep '^done: ' <<<"$out") || fail "no 'done:' summary line in: $out"
/usr/bin/python3 - "$line" <<'PY' || fail "cannot parse the summary line: $line"
import re, sys
m = re.fullmatch(r"done: (\d+) steps, (\d+) tok/s, loader wait (\d+\.\d+)% of step time, "
                 r"exposed communication (\d+\.\d+)%, data-parallel traffic (\d+\.\d+) MiB/step per rank \(ring model\)",
                 sys.argv[1].strip())
assert m, "format"
steps, tok_s, wait, exposed = int(m[1]), int(m[2]), float(m[3]), float(m[4])
assert steps == 5, f"steps {steps}"
assert tok_s > 0 and 0 <= wait <= 100 and 0 <= exposed <= 100, (tok_s, wait, exposed)
print(f"parsed: loader wait {wait}% of step time")
PY

/usr/bin/python3 - <<'PY' || fail "trace.json is not a usable trace"
import json
t = json.load(open("trace.json"))
events = t["traceEvents"] if isinstance(t, dict) else t
names = {e.get("name") for e in events}
for n in ("data", "forward", "backward", "optimizer"):
    assert n in names, f"no '{n}' span in the trace: {sorted(map(str, names))[:20]}"
PY

# --quiet drops the banner and the progress lines but keeps the final summary.
q=$(tiny_train quiet ds train.steps=2 --quiet) || fail "quiet training"
[[ $q == "done: 2 steps, "* && $(wc -l <<< "$q") -eq 1 ]] || fail "--quiet printed more or less than the summary: $q"
# --json: one JSON object on stdout and nothing else, the same numbers as metrics.jsonl.
j=$(tiny_train json ds train.steps=3 --json) || fail "json training"
/usr/bin/python3 - "$j" json/metrics.jsonl <<'PY' || fail "--json printed: $j"
import json, sys
s = json.loads(sys.argv[1])
last = [e for e in map(json.loads, open(sys.argv[2])) if "loss" in e][-1]
assert s["last_step"] == 3 and s["steps_run"] == 3 and abs(s["final_loss"] - last["loss"]) < 1e-6, s
assert s["final_val_loss"] is None and s["tokens_per_s"] > 0, s
PY
echo PASS
