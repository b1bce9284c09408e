#!/usr/bin/env bash
# The default job: install what is missing, build, prepare the King James Bible (Debian's bible-kjv,
# no download) with the byte-level tokenizer, train the default model, and print sampled text.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
T=build/src/cli/tessera
if [[ ! -f data/kjv/manifest.json ]]; then
  $T prepare --kjv --tokenizer byte --out data/kjv
fi
$T train --config configs/default.toml "$@"
$T sample --run runs/default --prompt "And God said" --tokens 300 --temperature 0.8 --top-k 40
