# The shared start of the trainer benches, sourced once BUILD is set: HERE (the repository), OUT
# (bench/results, created), TESSERA (the binary), TMP (BENCH_TMP if set, else a new temporary
# directory; removed on exit) holding the byte-level KJV dataset in $TMP/kjv.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$HERE/bench/results
TESSERA=$BUILD/src/cli/tessera
mkdir -p "$OUT"
TMP=${BENCH_TMP:-$(mktemp -d)}; trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP"
"$TESSERA" prepare --kjv --tokenizer byte --out "$TMP/kjv" >/dev/null
# done_tok_s LOG: the tokens/s of the trainer's final "done: N steps, X tok/s" line in LOG.
done_tok_s() { grep '^done:' "$1" | sed -E 's/.* ([0-9.]+) tok\/s.*/\1/'; }
