#!/bin/sh
# Runs a traced training job, then tools/trace_overlap.py on its trace.
#   dp_trace_overlap.sh <trace.json> <command...>    (the command must write <trace.json>)
set -e
trace=$1; shift
rm -f "$trace"
"$@"
exec /usr/bin/python3 "$(dirname "$0")/../../tools/trace_overlap.py" --require-overlap "$trace"
