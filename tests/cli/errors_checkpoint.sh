# Checkpoint and run-directory mistakes are refused with a clear message, a non-zero exit and no
# change to the run: corrupt checkpoint, another model's checkpoint, training over an earlier run,
# --resume with nothing to resume, and eval/sample/export of runs that do not exist.
# Usage: errors_checkpoint.sh TESSERA SOURCE_DIR
source "$(dirname "$0")/lib.sh"

make_dataset ds 30
tiny_train run ds train.steps=4 train.checkpoint_interval=2 --quiet || fail "the baseline run must train"
[[ -f run/checkpoints/step_00000004/shard_0.bin ]] || fail "no final checkpoint"

# Another model: the run's checkpoint has one layer.
expect_error "resume with another model" "n_layer" -- tiny_train run ds train.steps=6 model.n_layer=2 --resume
expect_error "resume with another width" "d_model" -- \
  tiny_train run ds train.steps=6 model.d_model=32 model.n_head=2 model.d_ff=128 --resume
# Training into a directory that holds a run, without --resume.
expect_error "out_dir holds checkpoints" "run|--resume" -- tiny_train run ds train.steps=6
# ... found before the data is opened and the model built (seconds for a large model).
expect_error "out_dir refused before the data is read" "already holds checkpoints" -- \
  tiny_train run no_such_dataset train.steps=6
expect_error "resume refused before the data is read" "no complete checkpoint" -- \
  tiny_train nothing_here no_such_dataset train.steps=6 --resume
# A directory with an earlier run's metrics but no checkpoint (it stopped before its first one).
mkdir metrics_only && cp run/metrics.jsonl metrics_only/
expect_error "out_dir holds another run's metrics" "metrics_only" -- tiny_train metrics_only ds train.steps=6
# --resume where there is nothing to resume.
expect_error "resume with no run" "nothing_here" -- tiny_train nothing_here ds train.steps=6 --resume
mkdir empty_run
expect_error "resume in an empty directory" "empty_run" -- tiny_train empty_run ds train.steps=6 --resume

# One flipped byte in the newest checkpoint's shard: eval and export refuse it; --resume detects it,
# sets it aside (renamed, not deleted) and continues from the previous checkpoint.
cp -r run corrupt
printf 'X' | dd of=corrupt/checkpoints/step_00000004/shard_0.bin bs=1 seek=4000 conv=notrunc status=none
expect_error "eval of a corrupt checkpoint" "checksum" -- "$TESSERA" eval --run corrupt
expect_error "export of a corrupt checkpoint" "checksum" -- "$TESSERA" export --run corrupt --out x.safetensors
cp -r corrupt corrupt_only && rm -r corrupt_only/checkpoints/step_00000002
expect_error "corrupt checkpoint with no older one" "checksum|corrupt_only/checkpoints/step_00000004|loads" -- \
  tiny_train corrupt_only ds train.steps=6 --resume
out=$(tiny_train corrupt ds train.steps=6 --resume 2>&1) || fail "resume past a corrupt checkpoint must fall back: $out"
grep -q "falling back to the previous checkpoint: corrupt/checkpoints/step_00000002" <<<"$out" \
  || fail "no fallback message: $out"
grep -q "resuming from corrupt/checkpoints/step_00000002 (step 2)" <<<"$out" || fail "did not resume from step 2: $out"
[[ -d corrupt/checkpoints/step_00000004.corrupt && -f corrupt/checkpoints/step_00000006/COMPLETE ]] \
  || fail "the corrupt checkpoint was not set aside, or the run did not finish"
echo "ok: corrupt checkpoint -> set aside, resumed from step 2"
# A truncated shard and a broken manifest in the only checkpoint: refused, nothing changed.
cp -r run cut && rm -r cut/checkpoints/step_00000002 && truncate -s 2000 cut/checkpoints/step_00000004/shard_0.bin
expect_error "truncated checkpoint" "cut/checkpoints/step_00000004" -- tiny_train cut ds train.steps=6 --resume
cp -r run badjson && rm -r badjson/checkpoints/step_00000002 && echo '{"format":' >badjson/checkpoints/step_00000004/manifest.json
expect_error "malformed checkpoint manifest" "badjson/checkpoints/step_00000004" -- \
  tiny_train badjson ds train.steps=6 --resume

# Inference commands on runs that do not exist (or hold no checkpoint).
for cmd in eval sample; do
  expect_error "$cmd of a missing run" "no_such_run|run directory" -- "$TESSERA" $cmd --run no_such_run
  expect_error "$cmd of a directory without checkpoints" "empty_run|no checkpoint" -- "$TESSERA" $cmd --run empty_run
done
expect_error "export of a missing run" "no_such_run|run directory" -- "$TESSERA" export --run no_such_run --out x.safetensors
expect_error "export of a directory without checkpoints" "empty_run|no checkpoint" -- \
  "$TESSERA" export --run empty_run --out x.safetensors
expect_error "eval of a missing weights file" "no_such.safetensors" -- \
  "$TESSERA" eval --weights no_such.safetensors --data ds
expect_error "plot of a missing run" "no_such_run" -- "$TESSERA" plot no_such_run --out x.svg
expect_error "eval of a run on a missing dataset" "no_such_data" -- "$TESSERA" eval --run run --data no_such_data

# Bad option values of the inference and data commands (a negative token count used to crash sample).
expect_error "sample --tokens -5" "--tokens" -- "$TESSERA" sample --run run --tokens -5
expect_error "sample --temperature -1" "--temperature" -- "$TESSERA" sample --run run --temperature -1
expect_error "sample --top-k -1" "--top-k" -- "$TESSERA" sample --run run --top-k -1
expect_error "eval --batch 0" "--batch" -- "$TESSERA" eval --run run --batch 0
expect_error "eval --seq -3" "--seq" -- "$TESSERA" eval --run run --seq -3
expect_error "eval --seq beyond the model" "--seq|max_seq_len" -- "$TESSERA" eval --run run --seq 1000
expect_error "eval of an unknown split" "test" -- "$TESSERA" eval --run run --split test
expect_error "prepare --shard-tokens -1" "--shard-tokens" -- "$TESSERA" prepare ds.txt --out fresh --shard-tokens -1
expect_error "prepare --val-fraction 1.5" "val fraction|1.5" -- "$TESSERA" prepare ds.txt --out fresh --val-fraction 1.5
expect_error "plot --smooth 2" "smooth" -- "$TESSERA" plot run --smooth 2 --out x.svg
expect_error "export into a missing directory" "no_such_dir" -- "$TESSERA" export --run run --out no_such_dir/m.safetensors
expect_error "unknown command" "frobnicate" -- "$TESSERA" frobnicate

# The undamaged run still resumes after all that.
tiny_train run ds train.steps=6 --resume --quiet || fail "resume of the intact run"
[[ -f run/checkpoints/step_00000006/COMPLETE ]] || fail "resumed run wrote no step-6 checkpoint"
echo PASS
