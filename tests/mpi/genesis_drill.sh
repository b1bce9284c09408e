# The shared start of the drills on a small dataset (sourced after `tessera` and `work` are set):
# config (the tests' tiny.toml), mpirun (oversubscribed, as root), fail(), and a fresh $work holding
# Genesis 1-4 prepared byte-level in $work/data (~210 windows of 64 tokens).
config=$(dirname "${BASH_SOURCE[0]}")/../../tests/configs/tiny.toml
mpirun="${MPIEXEC:-mpiexec} --allow-run-as-root --oversubscribe"
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work"; mkdir -p "$work"
bible -f "Gen1:1-Gen4:26" > "$work/genesis.txt"
"$tessera" prepare "$work/genesis.txt" --out "$work/data" --val-fraction 0.05 > /dev/null
