# Bad run configs are refused before anything is written: a non-zero exit, a message naming the
# offending key, and no change to the files already there (dataset, earlier runs).
# Usage: errors_config.sh TESSERA SOURCE_DIR
source "$(dirname "$0")/lib.sh"

make_dataset ds 30
tiny_train run ds train.steps=2 --quiet || fail "the baseline run must train"

expect_error "unknown key" "bogus_key|[train]" -- tiny_train new ds train.bogus_key=1
expect_error "misspelt key" "nlayer|n_layer" -- tiny_train new ds model.nlayer=2
expect_error "unknown section" "optimiser" -- tiny_train new ds optimiser.lr=0.1
expect_error "n_head does not divide d_model" "n_head|d_model" -- tiny_train new ds model.n_head=5
expect_error "batch not divisible by micro-batch" "batch_tokens|micro_batch" -- \
  tiny_train new ds train.batch_tokens=96
expect_error "wrong value type" "steps|integer" -- tiny_train new ds train.steps=many
expect_error "negative steps" "steps" -- tiny_train new ds train.steps=-3
expect_error "override without '='" "train.steps" -- tiny_train new ds train.steps
expect_error "unknown device" "train.device|\"cpu\" or \"cuda\"" -- tiny_train new ds train.device=tpu
# A device this build lacks, or a CUDA build on a machine without a GPU ("no CUDA device").
if ! "$TESSERA" --version | grep -q "device 0:"; then
  expect_error "a device this build or machine lacks" "train.device = \"cuda\"|train.device = \"cpu\"" -- \
    tiny_train new ds train.device=cuda
fi
# The same checks apply to keys in the config file itself.
sed 's/^seed = /sede = /' "$CONFIG" >typo.toml
expect_error "unknown key in the file" "sede|typo.toml" -- \
  "$TESSERA" train --config typo.toml "${TINY[@]}" data.dir=ds train.out_dir=new
printf 'this is [not toml\n' >broken.toml
expect_error "unparsable file" "broken.toml" -- \
  "$TESSERA" train --config broken.toml data.dir=ds train.out_dir=new
expect_error "missing config file" "nonexistent.toml" -- \
  "$TESSERA" train --config nonexistent.toml
# TESSERA_MAX_CPU_ISA caps every level choice: an unknown value is refused naming the variable, a named
# level above the cap is refused, and the cap reaches --version and oneDNN.
expect_error "unknown TESSERA_MAX_CPU_ISA" "TESSERA_MAX_CPU_ISA=\"avx3\"|avx2, avx512 or avx512_bf16" -- \
  env TESSERA_MAX_CPU_ISA=avx3 "$TESSERA" train --config "$CONFIG" "${TINY[@]}" data.dir=ds train.out_dir=new
expect_error "a level above TESSERA_MAX_CPU_ISA" "cpu_isa = \"avx512\"|\"avx2\"" -- \
  env TESSERA_MAX_CPU_ISA=avx2 "$TESSERA" train --config "$CONFIG" "${TINY[@]}" data.dir=ds train.out_dir=new \
  train.cpu_isa=avx512
capped=$(TESSERA_MAX_CPU_ISA=avx2 "$TESSERA" --version)
grep -q "^CPU kernels: avx2 (auto; " <<<"$capped" || fail "the cap is not the level in --version: $capped"
grep -q "oneDNN: avx2)" <<<"$capped" || fail "oneDNN is not capped with the kernels: $capped"
[[ ! -e new ]] || fail "a refused run created its out_dir"
echo PASS
