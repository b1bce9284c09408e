#!/usr/bin/env bash
# docs/config-reference.md is what `tessera config reference` prints from the schema: a key added,
# renamed or re-documented without regenerating the file fails here, naming the command that fixes it.
#   config_reference.sh <tessera> <source_dir>
set -euo pipefail
tessera=$1; src=$2
doc=$src/docs/config-reference.md
generated=$(mktemp)
trap 'rm -f "$generated"' EXIT
"$tessera" config reference > "$generated"
grep -q '^| `train.steps` | integer | `100` |' "$generated" || { echo "FAIL: no train.steps row in the reference"; exit 1; }
if ! diff -u "$doc" "$generated"; then
  echo "FAIL: docs/config-reference.md is stale: regenerate it with"
  echo "  ./build/src/cli/tessera config reference > docs/config-reference.md"
  exit 1
fi
echo "PASS: docs/config-reference.md matches the schema ($(grep -c '^| `' "$generated") keys)"
