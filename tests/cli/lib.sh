# Shared helpers of the CLI end-to-end tests: each test script sources this with
# `source lib.sh "$TESSERA" "$SOURCE_DIR"` and gets a private temp dir, a tiny model and checks.
set -euo pipefail

TESSERA=$(readlink -f "$1")
SRC=$(readlink -f "$2")
CONFIG=$SRC/tests/configs/tiny.toml
export OMP_NUM_THREADS=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tessera_cli.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

# A one-layer model on 2 x 32 token micro-batches keeps every run well under a second.
TINY=(model.n_layer=1 train.micro_batch=2 data.seq_len=32 train.batch_tokens=64 train.threads=1
      train.eval_interval=0 train.log_interval=1)

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# make_text FILE LINES [SEED]: deterministic word soup, so the tests need no corpus on disk.
make_text() {
  /usr/bin/python3 - "$1" "$2" "${3:-1}" <<'PY'
import random, sys
path, lines, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
words = "in the beginning god created heaven and earth light was good day night waters".split()
with open(path, "w") as f:
    for _ in range(lines):
        f.write(" ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) + "\n")
PY
}

# make_dataset DIR [LINES] [extra prepare args]: a byte-tokenized dataset with small shards.
make_dataset() {
  local dir=$1 lines=${2:-400}
  shift $(( $# >= 2 ? 2 : 1 ))
  make_text "$dir.txt" "$lines"
  "$TESSERA" prepare "$dir.txt" --out "$dir" --tokenizer byte --val-fraction 0.1 --shard-tokens 8000 "$@" \
    >/dev/null 2>"$dir.prepare.log" || { cat "$dir.prepare.log" >&2; fail "prepare $dir"; }
}

# tiny_train OUT_DIR DATA_DIR [overrides and flags...]
tiny_train() {
  local out=$1 data=$2
  shift 2
  "$TESSERA" train --config "$CONFIG" "${TINY[@]}" data.dir="$data" train.out_dir="$out" "$@"
}

# snapshot DIR...: every path and every file's checksum, to prove a failed command changed nothing.
snapshot() {
  find "$@" -printf '%p %y %s %T@\n' | sort
  find "$@" -type f -print0 | sort -z | xargs -0 -r sha256sum
}

# expect_error NAME 'pattern1|pattern2...' -- CMD...: CMD must exit non-zero (not by a signal or
# crash), print "error: ..." with every '|'-separated pattern (case-insensitive) and leave every file under
# $WORK exactly as it was.
expect_error() {
  local name=$1 patterns=$2
  shift 3
  local before after out rc=0
  before=$(snapshot "$WORK")
  out=$("$@" 2>&1) || rc=$?
  after=$(snapshot "$WORK")
  [[ $rc -ne 0 ]] || fail "$name: succeeded but should have failed; output: $out"
  [[ $rc -lt 128 ]] || fail "$name: died with signal/status $rc instead of a clean error; output: $out"
  grep -q '^error: ' <<<"$out" || fail "$name: no 'error: ' line in the output: $out"
  local IFS='|'
  for p in $patterns; do
    grep -qiF -- "$p" <<<"$out" || fail "$name: message does not mention '$p': $out"
  done
  if [[ $before != "$after" ]]; then
    diff <(echo "$before") <(echo "$after") >&2 || true
    fail "$name: the failed command changed files"
  fi
  echo "ok: $name -> $(grep '^error: ' <<<"$out" | head -1 | cut -c1-160)"
}

# train_losses METRICS FIRST LAST [repeats]: the raw "loss" text of train steps FIRST..LAST, one per
# line (raw text, so the comparison is bitwise: the writer prints every float with round-trip digits).
# A step logged twice is an error, unless "repeats" is given (a run resumed from a checkpoint older
# than its last logged step re-logs the steps after it): then the repeated losses must be identical.
train_losses() {
  /usr/bin/python3 - "$@" <<'PY'
import json, re, sys
path, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
repeats = len(sys.argv) > 4 and sys.argv[4] == "repeats"
seen = {}
for line in open(path):
    rec = json.loads(line)
    if "loss" not in rec:
        continue
    raw = re.search(r'"loss":([^,}]+)', line).group(1)
    if rec["step"] in seen and not repeats:
        sys.exit(f"{path}: step {rec['step']} logged twice")
    if rec["step"] in seen and seen[rec["step"]] != raw:
        sys.exit(f"{path}: step {rec['step']} re-run after resume gave loss {raw}, first {seen[rec['step']]}")
    seen[rec["step"]] = raw
for s in range(first, last + 1):
    if s not in seen:
        sys.exit(f"{path}: no loss for step {s}")
    print(s, seen[s])
PY
}
