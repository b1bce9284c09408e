# Helpers shared by the drill scripts (launch_drills.sh, preemption_drills.sh); they set $tessera,
# $here and $work, then `source "$here/drill_lib.sh"`.
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
