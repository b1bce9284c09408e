# Damaged or missing datasets are refused with a message naming the bad file, a non-zero exit, and
# no change to any file; prepare will not overwrite an existing dataset without --overwrite.
# Usage: errors_data.sh TESSERA SOURCE_DIR
source "$(dirname "$0")/lib.sh"

make_dataset ds 300  # ~13k train tokens: two train shards of 8000 tokens
[[ -f ds/train_000001.bin ]] || fail "expected two train shards"

expect_error "missing dataset dir" "no_such_dataset|prepare" -- tiny_train run no_such_dataset train.steps=2
mkdir empty_dir
expect_error "dir without a manifest" "empty_dir|manifest" -- tiny_train run empty_dir train.steps=2

cp -r ds missing && rm missing/train_000001.bin
expect_error "missing shard file" "missing/train_000001.bin" -- tiny_train run missing train.steps=2

cp -r ds truncated && truncate -s 5000 truncated/train_000001.bin
expect_error "truncated shard" "truncated/train_000001.bin|truncated" -- tiny_train run truncated train.steps=2

cp -r ds magic && printf '\x01\x02\x03\x04' | dd of=magic/train_000000.bin conv=notrunc status=none
expect_error "wrong-magic shard" "magic/train_000000.bin|magic" -- tiny_train run magic train.steps=2

# A flipped token in the middle keeps header and size valid: only the checksum can tell.
cp -r ds flipped && printf 'Z' | dd of=flipped/train_000001.bin bs=1 seek=6000 conv=notrunc status=none
expect_error "corrupt shard contents" "flipped/train_000001.bin|checksum" -- tiny_train run flipped train.steps=2

cp -r ds badmanifest && printf '{"format": "tessera-token-dataset", "shards": [' >badmanifest/manifest.json
expect_error "broken manifest" "badmanifest" -- tiny_train run badmanifest train.steps=2
[[ ! -e run ]] || fail "a refused run created its out_dir"

# A validation split without one full evaluation batch (about 39 windows of 33 tokens, 64 asked):
# refused before training, never a validation loss of 0.0 (nothing written: expect_error checks).
expect_error "validation split smaller than one batch" "validation split|eval_interval = 0" -- \
  tiny_train run ds train.steps=2 train.eval_interval=1 train.micro_batch=64 train.batch_tokens=2048

# Exit codes by kind (docs/usage.md#exit-codes): usage 2, config 4, data 5.
exit_code_of() { local rc=0; "$@" >/dev/null 2>&1 || rc=$?; echo $rc; }
[[ $(exit_code_of "$TESSERA" train --config no_such.toml) -eq 2 ]] || fail "a missing --config file must exit 2"
[[ $(exit_code_of "$TESSERA" train --config "$CONFIG" --no-such-flag) -eq 2 ]] || fail "an unknown flag must exit 2"
[[ $(exit_code_of tiny_train run ds train.steps=0) -eq 4 ]] || fail "a bad setting must exit 4"
[[ $(exit_code_of tiny_train run no_such_dataset train.steps=2) -eq 5 ]] || fail "a missing dataset must exit 5"

# A dataset whose vocabulary exceeds the model's.
make_text big.txt 200 2
"$TESSERA" prepare big.txt --out bpe --tokenizer bpe --vocab-size 300 --val-fraction 0.1 >/dev/null 2>&1 ||
  fail "prepare bpe"
expect_error "vocabulary larger than the model's" "vocab" -- tiny_train run bpe train.steps=2

# prepare into an existing dataset.
expect_error "prepare over an existing dataset" "ds|--overwrite" -- \
  "$TESSERA" prepare ds.txt --out ds --tokenizer byte
expect_error "prepare with no input" "input" -- "$TESSERA" prepare --out fresh
expect_error "prepare of a missing file" "no_such_file.txt" -- "$TESSERA" prepare no_such_file.txt --out fresh
expect_error "prepare with an unknown tokenizer" "wordpiece" -- \
  "$TESSERA" prepare ds.txt --out fresh --tokenizer wordpiece
# --overwrite does replace it (and the result trains).
"$TESSERA" prepare ds.txt --out ds --tokenizer byte --overwrite >/dev/null 2>&1 || fail "prepare --overwrite"
tiny_train run ds train.steps=2 --quiet || fail "training on the re-prepared dataset"
echo PASS
