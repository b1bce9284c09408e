#!/bin/sh
# Empties a run directory, then runs a command (the trainer refuses an out_dir holding an earlier
# run, and a test may run again, e.g. ctest --repeat).   dp_fresh_dir.sh <dir> <command...>
dir=$1; shift
rm -rf "$dir"
exec "$@"
