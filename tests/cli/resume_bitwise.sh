# Resume is exact: a run stopped (with a checkpoint) and resumed continues with bitwise the same
# losses, validation losses, parameters and optimizer state as the same run done in one go.
# Usage: resume_bitwise.sh TESSERA SOURCE_DIR
source "$(dirname "$0")/lib.sh"

# ~1.2k train tokens (~38 windows of 32): 12 steps of 2 x 2 sequences cross an epoch boundary after
# the resume points.
make_dataset ds 30
# grad accumulation 2, eval every 4 steps, cosine schedule with warm-up (tiny.toml).
RUN=(train.batch_tokens=128 train.steps=12 train.eval_interval=4 --quiet)

tiny_train A ds "${RUN[@]}" || fail "run A"
tiny_train B ds "${RUN[@]}" --stop-after 6 || fail "run B, first part"
[[ -d B/checkpoints/step_00000006 && ! -d B/checkpoints/step_00000012 ]] || fail "--stop-after 6 did not stop at 6"
tiny_train B ds "${RUN[@]}" --resume 2>B.resume.err || { cat B.resume.err >&2; fail "run B, resumed part"; }
! grep -q "changed settings" B.resume.err || fail "resume with the same settings warned: $(cat B.resume.err)"
# Three pieces: resume twice, the second time from a checkpoint that was itself resumed.
tiny_train C ds "${RUN[@]}" --stop-after 3 || fail "run C, part 1"
tiny_train C ds "${RUN[@]}" --resume --stop-after 5 || fail "run C, part 2"
# The last part reads only the resolved config the run wrote (no overrides): it must round-trip exactly.
"$TESSERA" train --config C/config.toml --resume --quiet || fail "run C, part 3 from C/config.toml"

# A crash: periodic checkpoints at 4 and 8, the process dies after step 10 (simulated by removing the
# step-10 checkpoint that --stop-after wrote). The resume from step 8 re-runs steps 9 and 10.
tiny_train D ds "${RUN[@]}" train.checkpoint_interval=4 --stop-after 10 || fail "run D, part 1"
[[ -d D/checkpoints/step_00000008 && -d D/checkpoints/step_00000010 ]] || fail "run D lacks its checkpoints"
rm -r D/checkpoints/step_00000010
tiny_train D ds "${RUN[@]}" train.checkpoint_interval=4 --resume || fail "run D, resumed from step 8"

# The same crash with asynchronous saves, written from the live buffers while the next steps run:
# the checkpoint of step 8 must hold step 8's state although the updates of steps 9 and 10 came.
ASYNC=(train.checkpoint_interval=4 train.async_checkpoint=true)
tiny_train F ds "${RUN[@]}" "${ASYNC[@]}" --stop-after 10 || fail "run F, part 1"
rm -r F/checkpoints/step_00000010
cmp D/checkpoints/step_00000008/shard_0.bin F/checkpoints/step_00000008/shard_0.bin ||
  fail "the asynchronous checkpoint of step 8 differs from the synchronous one"
tiny_train F ds "${RUN[@]}" "${ASYNC[@]}" --resume || fail "run F, resumed from step 8"

la=$(train_losses A/metrics.jsonl 1 12) || fail "metrics of A"
for r in D F; do
  lr=$(train_losses $r/metrics.jsonl 1 12 repeats) || fail "metrics of $r"
  [[ $la == "$lr" ]] || fail "losses of run $r (resumed from a periodic checkpoint) differ from run A"
  cmp A/checkpoints/step_00000012/shard_0.bin $r/checkpoints/step_00000012/shard_0.bin ||
    fail "final checkpoint of $r differs from A's"
done
for r in B C; do
  lr=$(train_losses $r/metrics.jsonl 1 12) || fail "metrics of $r"
  if [[ $la != "$lr" ]]; then
    diff <(echo "$la") <(echo "$lr") >&2 || true
    fail "losses of the resumed run $r differ from the uninterrupted run A"
  fi
  for step in 8 12; do
    va=$(grep "\"step\":$step,\"val_loss\"" A/metrics.jsonl) || fail "A has no val loss at step $step"
    vr=$(grep "\"step\":$step,\"val_loss\"" $r/metrics.jsonl) || fail "$r has no val loss at step $step"
    [[ $va == "$vr" ]] || fail "val loss at step $step: A $va, $r $vr"
  done
  # The shard holds parameters and both Adam moments: equal bytes mean equal training state.
  cmp A/checkpoints/step_00000012/shard_0.bin $r/checkpoints/step_00000012/shard_0.bin ||
    fail "final checkpoint of $r differs from A's"
  "$TESSERA" export --run $r --out $r.safetensors >/dev/null || fail "export $r"
done
"$TESSERA" export --run A --out A.safetensors >/dev/null || fail "export A"
cmp A.safetensors B.safetensors || fail "exported weights of A and B differ"
cmp A.safetensors C.safetensors || fail "exported weights of A and C differ"
# Not trivially equal: training moved the parameters away from the step-6 checkpoint.
if cmp -s A/checkpoints/step_00000012/shard_0.bin B/checkpoints/step_00000006/shard_0.bin; then
  fail "step 12 equals step 6"
fi
# Resuming with another seed works but says the run is no longer the uninterrupted one.
cp -r B E && rm -r E/checkpoints/step_00000012
tiny_train E ds "${RUN[@]}" train.seed=99 --resume 2>E.err || fail "resume with another seed"
grep -q "changed settings (train.seed 1337 -> 99)" E.err || fail "no warning for the changed seed: $(cat E.err)"

echo "steps 1..12 identical:"
echo "$la" | sed -n '6,12p'
echo PASS
