# Helpers shared by the drill scripts (launch_drills.sh, preemption_drills.sh); they set $tessera,
# $data, $here and $work, then `source "$here/drill_lib.sh"`.
config=$here/../../tests/configs/tiny.toml
mpirun=${MPIEXEC:-mpiexec}
# The drills' job: 4 ranks' worth of a tiny model, 12 steps of 768 tokens, a checkpoint every 3.
drill_common="data.dir=$data train.threads=1 train.steps=12 train.micro_batch=1 train.batch_tokens=768
              train.eval_interval=0 train.checkpoint_interval=3 train.keep_checkpoints=10 parallel.dp=0"
fail() { echo "FAIL: $*" >&2; exit 1; }  # stderr: also seen from inside $(...)
export_weights() { "$tessera" export --run "$1" --out "$1.safetensors" --force >/dev/null; }
same_weights() {  # run_dir [reference name, default "reference"]: bitwise equal to the uninterrupted run
  export_weights "$1"
  /usr/bin/python3 "$here/compare_safetensors.py" --tolerance 0 "$work/${2:-reference}.safetensors" "$1.safetensors" \
    || fail "$1 does not end bitwise equal to the uninterrupted run"
}
expect() {  # log pattern...
  local log=$1; shift
  for p in "$@"; do grep -q -- "$p" "$log" || { cat "$log"; fail "expected '$p' in $log"; }; done
}
