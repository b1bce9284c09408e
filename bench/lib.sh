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
