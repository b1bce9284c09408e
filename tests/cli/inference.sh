# After training: sample generates the requested number of tokens, eval reports loss and
# perplexity, an exported safetensors file evaluates to the same loss as its checkpoint, plot draws
# an SVG. Usage: inference.sh TESSERA SOURCE_DIR
source "$(dirname "$0")/lib.sh"

make_dataset ds 60
tiny_train run ds train.steps=6 --quiet || fail "training"

# sample: byte tokenizer, so N tokens are N bytes after the prompt (plus the final newline).
out=$("$TESSERA" sample --run run --prompt "in the " --tokens 40 --seed 7 --threads 1) || fail "sample"
n=$(printf '%s\n' "$out" | wc -c)
[[ $n -eq $((7 + 40 + 1)) ]] || fail "sample printed $n bytes, expected 48: '$out'"
[[ $out == "in the "* ]] || fail "sample does not start with its prompt: '$out'"
again=$("$TESSERA" sample --run run --prompt "in the " --tokens 40 --seed 7 --threads 1)
[[ $again == "$out" ]] || fail "sample with the same seed differs"
# Longer than the model's context (64): the window slides.
long=$("$TESSERA" sample --run run --prompt "in the " --tokens 150 --threads 1) || fail "long sample"
[[ $(printf '%s\n' "$long" | wc -c) -eq $((7 + 150 + 1)) ]] || fail "long sample has the wrong length"
greedy=$("$TESSERA" sample --run run --prompt "and" --tokens 20 --temperature 0 --threads 1) || fail "greedy sample"
[[ $(printf '%s\n' "$greedy" | wc -c) -eq 24 ]] || fail "greedy sample has the wrong length: '$greedy'"

# eval: "loss X nats/token, perplexity Y" with Y = exp(X).
ev=$("$TESSERA" eval --run run --seq 32 --batch 2 --threads 1) || fail "eval --run"
echo "$ev"
loss=$(sed -n 's/.*loss \([0-9.]*\) nats\/token.*/\1/p' <<<"$ev")
ppl=$(sed -n 's/.*perplexity \([0-9.]*\).*/\1/p' <<<"$ev")
[[ -n $loss && -n $ppl ]] || fail "eval output has no loss/perplexity: $ev"
/usr/bin/python3 -c "import math,sys; l,p=float('$loss'),float('$ppl'); sys.exit(not (0<l<math.log(256)+1 and abs(math.exp(l)-p)<1e-3*p))" ||
  fail "loss $loss and perplexity $ppl do not fit"
"$TESSERA" eval --run run --split train --batches 2 --seq 32 --batch 2 --threads 1 | grep -q "run.*/train: loss" ||
  fail "eval on the train split"

# export -> eval --weights gives exactly the same numbers as eval --run.
"$TESSERA" export --run run --out model.safetensors | grep -q "wrote model.safetensors" || fail "export"
head -c 8 model.safetensors | od -An -tu8 | grep -q '[0-9]' || fail "export wrote no safetensors header"
ew=$("$TESSERA" eval --weights model.safetensors --data ds --seq 32 --batch 2 --threads 1) || fail "eval --weights"
echo "$ew"
[[ ${ev#*:} == "${ew#*:}" ]] || fail "eval --weights ($ew) differs from eval --run ($ev)"
# An explicit checkpoint directory works like the run directory (its latest checkpoint).
ec=$("$TESSERA" eval --run run/checkpoints/step_00000006 --seq 32 --batch 2 --threads 1) || fail "eval of a checkpoint"
[[ ${ec#*:} == "${ev#*:}" ]] || fail "eval of the checkpoint directory differs: $ec"

# plot: an SVG with one curve per run.
tiny_train run2 ds train.steps=4 --quiet || fail "second run"
"$TESSERA" plot run run2 --out loss.svg >/dev/null || fail "plot"
grep -q '<svg' loss.svg && grep -q '</svg>' loss.svg || fail "plot wrote no SVG"
/usr/bin/python3 -c "import xml.dom.minidom,sys; xml.dom.minidom.parse('loss.svg')" || fail "the SVG is not well-formed XML"
[[ $(grep -c '<polyline\|<path' loss.svg) -ge 2 ]] || fail "the SVG has fewer than two curves"
echo PASS
