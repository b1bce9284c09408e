# tessera export --hf: for a GPT-2 (tied and untied, byte tokenizer) and a LLaMA (BPE tokenizer)
# checkpoint, a directory whose config.json and tensors are what transformers expects (checked with
# Debian's python3, no transformers: tests/cli/check_hf_dir.py), whose weights equal `export --out`'s
# bit for bit and read back bitwise (logits and eval through --weights DIR equal those of --run);
# a second export into the same DIR fails without --force and changes nothing; init_weights = DIR
# checks the config. The logit comparison with transformers itself is tools/check_hf_export.py.
# Usage: hf_export.sh TESSERA SOURCE_DIR
source "$(dirname "$0")/lib.sh"
CHECK=(/usr/bin/python3 "$SRC/tests/cli/check_hf_dir.py")

make_dataset ds 60
"$TESSERA" prepare ds.txt --out bpe --tokenizer bpe --vocab-size 300 --val-fraction 0.1 >/dev/null 2>&1 ||
  fail "prepare bpe"
tiny_train gpt ds train.steps=3 --quiet || fail "training gpt2"
tiny_train gptu ds train.steps=3 model.tied_embeddings=false --quiet || fail "training untied gpt2"
LLAMA=(model.preset=tiny-llama model.vocab_size=320 model.n_layer=2)
tiny_train llama bpe train.steps=3 "${LLAMA[@]}" --quiet || fail "training llama"

IDS=5,17,100,255,3,3,42,7,0,1,9
for m in gpt gptu llama; do
  out=$("$TESSERA" export --run $m --hf $m.hf) || fail "export --hf $m"
  echo "$out"
  grep -q "^wrote $m.hf" <<<"$out" || fail "export --hf $m printed no 'wrote' line"
  grep -q "^note: tokenizer: " <<<"$out" || fail "export --hf $m printed no tokenizer note"
  "$TESSERA" export --run $m --out $m.safetensors >/dev/null || fail "export --out $m"
  # Bitwise round trip: the directory reads back to the checkpoint's model.
  "$TESSERA" logits --run $m --ids $IDS --out $m.run.logits >/dev/null || fail "logits --run $m"
  "$TESSERA" logits --weights $m.hf --ids $IDS --out $m.hf.logits >/dev/null || fail "logits --weights $m.hf"
  cmp -s $m.run.logits $m.hf.logits || fail "$m: logits through --weights $m.hf differ from the checkpoint's"
  data=ds; [[ $m == llama ]] && data=bpe
  ev=$("$TESSERA" eval --run $m --seq 32 --batch 2 --threads 1) || fail "eval --run $m"
  ew=$("$TESSERA" eval --weights $m.hf --data $data --seq 32 --batch 2 --threads 1) || fail "eval --weights $m.hf"
  [[ ${ev#*:} == "${ew#*:}" ]] || fail "$m: eval --weights DIR ($ew) differs from eval --run ($ev)"
done

"${CHECK[@]}" gpt.hf --same-values gpt.safetensors --expect vocab_size=256 n_positions=64 n_embd=64 n_layer=1 \
  n_head=4 n_inner=256 layer_norm_epsilon=1e-05 tie_word_embeddings=true bos_token_id=null || fail "gpt.hf"
"${CHECK[@]}" gptu.hf --same-values gptu.safetensors --expect tie_word_embeddings=false n_layer=1 || fail "gptu.hf"
"${CHECK[@]}" llama.hf --same-values llama.safetensors --expect vocab_size=320 hidden_size=64 intermediate_size=160 \
  num_hidden_layers=2 num_attention_heads=4 num_key_value_heads=2 max_position_embeddings=64 rms_norm_eps=1e-05 \
  rope_theta=10000.0 tie_word_embeddings=false bos_token_id=1 eos_token_id=2 || fail "llama.hf"

# Tokenizers: the byte tokenizer as tokenizer.json, the SentencePiece model as itself.
[[ -f gpt.hf/tokenizer.json && -f gpt.hf/tokenizer_config.json ]] || fail "gpt.hf has no tokenizer.json"
cmp -s bpe/tokenizer.model llama.hf/tokenizer.model || fail "llama.hf/tokenizer.model is not the dataset's model"
grep -q '"LlamaTokenizer"' llama.hf/tokenizer_config.json || fail "llama.hf/tokenizer_config.json names no LlamaTokenizer"

# A second export into the same directory is refused and changes nothing; --force replaces it.
expect_error "export into a non-empty directory" "not empty|--force|gpt.hf" -- \
  "$TESSERA" export --run gptu --hf gpt.hf
"$TESSERA" export --run gptu --hf gpt.hf --force >/dev/null || fail "export --force"
"${CHECK[@]}" gpt.hf --same-values gptu.safetensors --expect tie_word_embeddings=false >/dev/null ||
  fail "export --force did not replace the model"
touch afile
expect_error "export onto a file" "not a directory" -- "$TESSERA" export --run gpt --hf afile
expect_error "export --hf and --out together" "excludes" -- "$TESSERA" export --run gpt --hf x --out y.safetensors
mkdir emptydir
expect_error "a directory without config.json" "config.json|export --hf" -- \
  "$TESSERA" eval --weights emptydir --data ds --seq 32 --batch 2

# model.init_weights = DIR: the run's model must be the directory's.
tiny_train from_hf bpe train.steps=1 "${LLAMA[@]}" model.init_weights="$WORK/llama.hf" --quiet ||
  fail "training from llama.hf"
expect_error "init_weights from a directory of another model" "norm_eps|config.json" -- \
  tiny_train bad bpe train.steps=1 "${LLAMA[@]}" model.norm_eps=1e-6 model.init_weights="$WORK/llama.hf" --quiet
# export --out onto an existing file: refused, nothing changed, unless --force.
expect_error "export --out onto an existing file" "already exists|--force" -- "$TESSERA" export --run gpt --out gpt.safetensors
"$TESSERA" export --run gpt --out gpt.safetensors --force >/dev/null || fail "export --out --force"
echo PASS
