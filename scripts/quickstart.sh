#!/usr/bin/env bash
# The default job: install what is missing, build, prepare the King James Bible (Debian's bible-kjv,
# no download) with a 4096-piece BPE tokenizer, train the default model, and print sampled text.
# Usage: scripts/quickstart.sh [key=value ...]   (overrides of configs/default.toml, e.g. train.steps=100)
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; fi
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
T=build/src/cli/tessera
if [[ ! -f data/kjv-bpe/manifest.json ]]; then
  $T prepare --kjv --tokenizer bpe --vocab-size 4096 --out data/kjv-bpe
fi
# A fresh run directory each time, so re-running never touches an earlier run.
RUN=runs/kjv-$(date +%Y%m%d-%H%M%S)
$T train --config configs/default.toml train.out_dir="$RUN" "$@"
echo "--- samples from $RUN ---"
for seed in 1 2 3; do
  $T sample --run "$RUN" --prompt "And God said" --tokens 120 --temperature 0.8 --top-k 40 --seed $seed
  echo
done
