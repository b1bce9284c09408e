# tessera checkpoint inspect / fingerprint / diff / convert, end to end: inspect verifies every piece
# and names damage with a fix; convert to safetensors and back is bitwise and diffs as equal, and a
# run resumed from the converted-back checkpoint continues exactly like the uninterrupted run; a
# tensor whose pieces do not match its saved fingerprint is named by fingerprint, inspect and --resume.
# Usage: checkpoint_tools.sh TESSERA SOURCE_DIR
source "$(dirname "$0")/lib.sh"

make_dataset ds 30
RUN=(train.batch_tokens=128 train.steps=12 train.eval_interval=4 --quiet)
tiny_train A ds "${RUN[@]}" || fail "run A"
tiny_train B ds "${RUN[@]}" --stop-after 6 || fail "run B, first part"
CK=B/checkpoints/step_00000006

# --- inspect: a run directory means its latest complete checkpoint, and says so.
out=$("$TESSERA" checkpoint inspect B) || fail "inspect B: $out"
for p in "latest complete checkpoint of run B" "step 6, saved by 1 rank" "layout: dp=1 tp=1 pp=1" "model: arch=gpt2" \
         "param/wte" "adam_v/h.0.mlp.fc.w" "all 48 pieces verified"; do
  grep -qF -- "$p" <<<"$out" || fail "inspect output lacks '$p': $out"
done
"$TESSERA" checkpoint inspect --json $CK >inspect.json || fail "inspect --json"
/usr/bin/python3 - inspect.json <<'PY' || fail "inspect --json content"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ok"] and j["step"] == 6 and j["ranks"] == 1, j
assert j["verify"]["pieces"] == j["verify"]["pieces_ok"] == j["totals"]["pieces"] == 48, j["verify"]
assert j["layout"]["dp"] == 1 and j["model_config"]["n_layer"] == 1 and j["state"]["adam_steps"] == 6
assert sum(t["bytes"] for t in j["tensors"]) == j["totals"]["bytes"] and j["latest_of_run"] is None
PY

# --- convert: checkpoint -> safetensors directory -> checkpoint, bitwise.
"$TESSERA" checkpoint convert B --out X >convert.out || fail "convert B -> X"
for f in model.safetensors optimizer.safetensors state.json; do [[ -f X/$f ]] || fail "X lacks $f"; done
"$TESSERA" export --run B --out B.safetensors >/dev/null || fail "export B"
cmp B.safetensors X/model.safetensors || fail "model.safetensors differs from what tessera export writes"
/usr/bin/python3 - X <<'PY' || fail "content of X"
import json, struct, sys
d = sys.argv[1]
def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))
m, o = header(d + "/model.safetensors"), header(d + "/optimizer.safetensors")
assert m["wte.weight"]["shape"] == [256, 64] and m["h.0.attn.c_attn.weight"]["shape"] == [64, 192], m.keys()
assert o["adam_m/h.0.attn.qkv.w"]["shape"] == [192, 64] and o["adam_v/wte"]["dtype"] == "F32"
s = json.load(open(d + "/state.json"))
assert s["step"] == 6 and s["adam_steps"] == 6 and s["loader"]["index"] > 0, s
assert s["run_config"]["train"]["steps"] == 12 and s["model_config"]["n_layer"] == 1
PY
"$TESSERA" checkpoint convert X --out F >convert_back.out || fail "convert X -> F"
grep -q "F/checkpoints/step_00000006" convert_back.out || fail "convert back does not name the new checkpoint"
for f in shard_0.bin manifest.json; do
  cmp $CK/$f F/checkpoints/step_00000006/$f || fail "round trip changed $f"
done
"$TESSERA" checkpoint inspect F --quiet >/dev/null || fail "inspect of the converted-back checkpoint"

# --- fingerprint and diff: the converted-back checkpoint holds the same state; other steps differ.
out=$("$TESSERA" checkpoint fingerprint $CK) || fail "fingerprint: $out"
grep -qE "^param/wte +[0-9a-f]{16} match" <<<"$out" || fail "fingerprint does not list param/wte as matching: $out"
grep -qF "all 48 fingerprinted tensors match their stored pieces" <<<"$out" || fail "fingerprint summary: $out"
grep -qF "all 48 fingerprinted tensors match" < <("$TESSERA" checkpoint inspect $CK) || fail "inspect checks fingerprints"
out=$("$TESSERA" checkpoint diff $CK F) || fail "diff of B and its converted-back copy: $out"
grep -qF "equal: all 48 tensors, the model config and the training state" <<<"$out" || fail "diff says: $out"
rc=0
"$TESSERA" checkpoint diff --json A B >diff.json || rc=$?
[[ $rc -eq 1 ]] || fail "diff of steps 12 and 6 exited $rc"
/usr/bin/python3 - diff.json <<'PY' || fail "diff --json of steps 12 and 6"
import json, sys
j = json.load(open(sys.argv[1]))
assert not j["equal"] and j["differing_tensors"] > 0 and j["ranks_a"] == 1, j
t = {x["key"]: x for x in j["tensors"]}["param/wte"]
assert t["result"] == "differs" and t["max_abs_diff"] > 0 and t["fingerprint_a"] != t["fingerprint_b"], t
assert t["pieces_a"] == [{"rank": 0, "elements": [0, 256 * 64]}], t
assert any(d.startswith("step 12 vs 6") for d in j["state_differences"]), j["state_differences"]
PY
# A saved fingerprint that the pieces do not add up to (planted in the manifest).
cp -r B P
/usr/bin/python3 - P/checkpoints/step_00000006/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
t = next(t for t in m["tensors"] if t["key"] == "adam_m/h.0.mlp.fc.w")
t["fingerprint"] = "%016x" % (int(t["fingerprint"], 16) ^ 1)
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
expect_error "fingerprint of a planted mismatch" "adam_m/h.0.mlp.fc.w|fingerprint mismatch|fix:" -- \
  "$TESSERA" checkpoint fingerprint P
expect_error "inspect of a planted mismatch" "adam_m/h.0.mlp.fc.w|fingerprint mismatch|1 tensor's stored pieces" -- \
  "$TESSERA" checkpoint inspect P
rc=0
out=$(tiny_train P ds "${RUN[@]}" --resume 2>&1) || rc=$?
[[ $rc -ne 0 && $rc -lt 128 ]] || fail "resume of a planted fingerprint mismatch exited $rc: $out"
for p in "adam_m/h.0.mlp.fc.w" "does not load as it was saved" "tessera checkpoint fingerprint"; do
  grep -qF -- "$p" <<<"$out" || fail "resume of a planted mismatch does not say '$p': $out"
done
[[ -d P/checkpoints/step_00000006 ]] || fail "the refused resume set the checkpoint aside"

# A run resumed from the converted-back checkpoint continues exactly like the uninterrupted run.
tiny_train F ds "${RUN[@]}" --resume 2>F.err || { cat F.err >&2; fail "resume F"; }
la=$(train_losses A/metrics.jsonl 7 12) || fail "metrics of A"
lf=$(train_losses F/metrics.jsonl 7 12) || fail "metrics of F"
[[ $la == "$lf" ]] || { diff <(echo "$la") <(echo "$lf") >&2; fail "losses after resuming F differ from A"; }
cmp A/checkpoints/step_00000012/shard_0.bin F/checkpoints/step_00000012/shard_0.bin || fail "final state of F differs"

# --- never overwrite; clear errors for paths that are not checkpoints.
expect_error "convert back over an existing checkpoint" "step_00000006|already exists" -- \
  "$TESSERA" checkpoint convert X --out F
expect_error "convert into a directory with a conversion" "X/model.safetensors|already exists" -- \
  "$TESSERA" checkpoint convert B --out X
expect_error "inspect of a missing path" "no_such|not a directory" -- "$TESSERA" checkpoint inspect no_such
expect_error "convert of a directory that holds nothing" "ds|holds no checkpoint" -- \
  "$TESSERA" checkpoint convert ds --out Y
expect_error "checkpoint without a subcommand" "inspect|fingerprint|diff|convert" -- "$TESSERA" checkpoint

# --- damage: named by file, tensor and element range, with the checkpoint to resume from instead.
tiny_train H ds "${RUN[@]}" train.checkpoint_interval=2 --stop-after 4 || fail "run H"
printf 'X' | dd of=H/checkpoints/step_00000004/shard_0.bin bs=1 seek=5000 conv=notrunc status=none
expect_error "inspect of a flipped byte" \
  "checksum mismatch|H/checkpoints/step_00000004/shard_0.bin|tensor 'param/|elements [|1 of 48 pieces|resume from the previous checkpoint step_00000002" \
  -- "$TESSERA" checkpoint inspect H
rc=0
"$TESSERA" checkpoint inspect --json H/checkpoints/step_00000004 >damaged.json 2>/dev/null || rc=$?
[[ $rc -eq 1 ]] || fail "inspect --json of a damaged checkpoint exited $rc"
/usr/bin/python3 -c "
import json; j = json.load(open('damaged.json'))
assert not j['ok'] and j['verify']['damaged_pieces'] == 1 and j['verify']['damage'][0]['what'] == 'checksum mismatch', j
assert 'step_00000002' in j['fix'], j['fix']" || fail "inspect --json of a damaged checkpoint"
cp -r B T && truncate -s -100 T/checkpoints/step_00000006/shard_0.bin
expect_error "inspect of a truncated shard" "truncated|adam_v/|no earlier complete checkpoint" -- \
  "$TESSERA" checkpoint inspect T
cp -r B M && echo '{"format":' >M/checkpoints/step_00000006/manifest.json
expect_error "inspect of a broken manifest" "manifest.json|not valid JSON|fix:" -- "$TESSERA" checkpoint inspect M
expect_error "convert of a damaged checkpoint" "checksum" -- "$TESSERA" checkpoint convert H/checkpoints/step_00000004 --out Z

"$TESSERA" checkpoint convert --help | grep -q "state.json" || fail "convert --help does not explain the directions"
echo PASS
