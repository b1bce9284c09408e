# After training: sample generates the requested number of tokens, eval reports loss and
# perplexity, an exported safetensors file evaluates to the same loss as its checkpoint, plot draws
# an SVG. Usage: inference.sh TESSERA SOURCE_DIR
source "$(dirname "$0")/lib.sh"

make_dataset ds 60
tiny_train run ds train.steps=6 --quiet || fail "training"

# sample: byte tokenizer, so N tokens are N bytes after the prompt, plus the final newline (counted
# from files: command substitution would drop sampled trailing newlines).
sample_bytes() { "$TESSERA" sample --run run --threads 1 "$@" >sample.out || fail "sample $*"; wc -c <sample.out; }
[[ $(sample_bytes --prompt "in the " --tokens 40 --seed 7) -eq $((7 + 40 + 1)) ]] ||
  fail "sample printed the wrong number of bytes: '$(cat sample.out)'"
[[ $(head -c 7 sample.out) == "in the " ]] || fail "sample does not start with its prompt: '$(cat sample.out)'"
cp sample.out first.out
sample_bytes --prompt "in the " --tokens 40 --seed 7 >/dev/null
cmp -s first.out sample.out || fail "sample with the same seed differs"
# Longer than the model's context (64): the window slides.
[[ $(sample_bytes --prompt "in the " --tokens 150) -eq $((7 + 150 + 1)) ]] || fail "long sample has the wrong length"
[[ $(sample_bytes --prompt "and" --tokens 20 --temperature 0) -eq 24 ]] || fail "greedy sample has the wrong length"
[[ $(sample_bytes --prompt "" --tokens 10) -eq 11 ]] || fail "sample without a prompt has the wrong length"

# Generated NUL bytes are printed too: a model trained on text that is mostly NUL samples them greedily.
/usr/bin/python3 -c "import sys; sys.stdout.buffer.write((b'ab' + bytes(6) + b'\n') * 200)" >nul.txt
"$TESSERA" prepare nul.txt --out nul --tokenizer byte --val-fraction 0.1 >/dev/null 2>&1 || fail "prepare nul"
tiny_train nulrun nul train.steps=30 --quiet || fail "training on NUL-heavy text"
"$TESSERA" sample --run nulrun --prompt ab --tokens 30 --temperature 0 --threads 1 >nul.out || fail "sample nulrun"
[[ $(wc -c <nul.out) -eq $((2 + 30 + 1)) ]] || fail "sample of NUL bytes printed $(wc -c <nul.out) bytes, expected 33"
[[ $(tr -cd '\000' <nul.out | wc -c) -gt 0 ]] || fail "the NUL-trained model sampled no NUL (test premise)"

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
