#!/usr/bin/env bash
# Loader overhead on the "bench-small" model: the share of step time the trainer spends waiting for
# the data loader (its "loader wait X% of step time" summary). The target is < 2%.
# Usage: bench/loader_overhead.sh [tessera binary] [steps] [threads]
#   DATA=<dir>  reuse a KJV dataset prepared with --tokenizer bpe --vocab-size 8192 (made if absent)
set -euo pipefail
source "$(dirname "$0")/script_args.sh"
bench_help_or_go_on "$@"
HERE=$(cd "$(dirname "$0")/.." && pwd)
TESSERA=$(readlink -f "${1:-$HERE/build/src/cli/tessera}")
[[ -x $TESSERA ]] || { echo "loader_overhead.sh: no tessera binary at '$TESSERA': build first (scripts/build.sh), or give the binary as the first argument" >&2; exit 2; }
STEPS=${2:-10}
THREADS=${3:-0}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tessera_loader_bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
DATA=${DATA:-$WORK/kjv-bpe8k}

# bench-small has V=8192: the dataset's BPE vocabulary must fit.
if [[ ! -f $DATA/manifest.json ]]; then
  echo "preparing the KJV with a BPE-8192 tokenizer into $DATA ..." >&2
  "$TESSERA" prepare --kjv --tokenizer bpe --vocab-size 8192 --out "$DATA" 2>/dev/null
fi

# bench-small (V=8192, T=512, L=6, NH=6, C=384), micro-batch 8, no accumulation, no eval/checkpoint
# in the timed steps except the final checkpoint.
out=$("$TESSERA" train --config "$HERE/tests/configs/tiny.toml" model.preset=bench-small data.dir="$DATA" data.seq_len=512 \
  train.micro_batch=8 train.batch_tokens=4096 train.steps="$STEPS" train.eval_interval=0 train.threads="$THREADS" \
  train.out_dir="$WORK/run" | tr '\r' '\n')
echo "$out" | grep -E '^(tessera:|step '"$STEPS"'/)' || true
line=$(grep '^done: ' <<<"$out") || { echo "no summary line in the trainer output" >&2; exit 1; }
echo "$line"
wait=$(sed -n 's/.*loader wait \([0-9.]*\)% of step time.*/\1/p' <<<"$line")
[[ -n $wait ]] || { echo "cannot parse the loader wait share" >&2; exit 1; }
if awk -v w="$wait" 'BEGIN { exit !(w < 2.0) }'; then
  echo "loader wait: ${wait}% of step time (target < 2%): OK"
else
  echo "loader wait: ${wait}% of step time (target < 2%): ABOVE TARGET"
  exit 1
fi
