#!/bin/sh
# Fixture of the data-parallel tests: the byte-level KJV dataset, and a copy whose train shard has
# one corrupted byte (only rank 0 verifies checksums, so only rank 0 fails set-up on it); empties
# the tests' run directory (the trainer refuses an out_dir holding an earlier run).
#   dp_setup_data.sh <tessera> <dir> <runs_dir>    -> <dir>/kjv, <dir>/kjv_corrupt, empty <runs_dir>
set -e
tessera=$1; dir=$2; runs=$3
rm -rf "$dir/kjv" "$dir/kjv_corrupt" "$runs"
mkdir -p "$runs"
mkdir -p "$dir"
"$tessera" prepare --kjv --tokenizer byte --out "$dir/kjv" > /dev/null
cp -r "$dir/kjv" "$dir/kjv_corrupt"
shard=$(ls "$dir"/kjv_corrupt/train_*.bin | head -n 1)
# Flip one token in the middle of the shard: same size, wrong checksum.
printf 'Z' | dd of="$shard" bs=1 seek=$(( $(wc -c < "$shard") / 2 )) conv=notrunc 2> /dev/null
cmp -s "$dir/kjv/$(basename "$shard")" "$shard" && { echo "corruption did not change $shard"; exit 1; }
echo "prepared $dir/kjv and $dir/kjv_corrupt"
