#!/usr/bin/python3
# Share of data-parallel all-reduce time hidden behind the backward pass, from a `tessera train --trace` file.
# Per rank and step: comm = union of "allreduce bucket <i>" spans, hidden = the part of it inside a
# "backward" span; prints a table and the total hidden/comm over all ranks and steps (first step
# excluded unless --include-first: it warms caches and allocators). --require-overlap fails unless, in
# every step used, some bucket was launched while the backward pass was still running (a structural
# check, not a timing one: a strategy that reduces only after the backward fails it at any speed).
# Usage: trace_overlap.py TRACE.json [--json OUT.json] [--include-first] [--require-overlap]
import argparse
import json
import sys


def union(spans):
    """Sorted, merged list of (t0, t1) intervals."""
    out = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def length(spans):
    return sum(b - a for a, b in spans)


def intersect(xs, ys):
    """Length of the intersection of two merged interval lists."""
    i = j = 0
    total = 0.0
    while i < len(xs) and j < len(ys):
        a, b = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        if b > a:
            total += b - a
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return total


def analyse(events, include_first):
    """Rows per (rank, step) and totals. A step ends with its "optimizer" span."""
    ranks = sorted({e["pid"] for e in events if e.get("ph") == "X"})
    rows = []
    for r in ranks:
        ev = [e for e in events if e.get("ph") == "X" and e["pid"] == r]
        ends = sorted(e["ts"] + e["dur"] for e in ev if e["name"] == "optimizer")
        start = min(e["ts"] for e in ev) - 1
        for step, end in enumerate(ends, 1):
            inside = [e for e in ev if start < e["ts"] <= end]
            start = end
            spans = lambda pred: union([(e["ts"], e["ts"] + e["dur"]) for e in inside if pred(e["name"])])
            comm = spans(lambda n: n.startswith("allreduce bucket"))
            bwd = spans(lambda n: n == "backward")
            wait = spans(lambda n: n == "grad sync wait")
            launched_in_bwd = sum(1 for e in inside if e["name"].startswith("allreduce bucket")
                                  and any(a <= e["ts"] < b for a, b in bwd))
            rows.append({"rank": r, "step": step, "backward_ms": length(bwd) / 1e3, "comm_ms": length(comm) / 1e3,
                         "hidden_ms": intersect(comm, bwd) / 1e3, "sync_wait_ms": length(wait) / 1e3,
                         "buckets": sum(1 for e in inside if e["name"].startswith("allreduce bucket")),
                         "launched_in_backward": launched_in_bwd})
    used = [x for x in rows if include_first or x["step"] > 1]
    comm = sum(x["comm_ms"] for x in used)
    hidden = sum(x["hidden_ms"] for x in used)
    return rows, {"steps_used": len({x["step"] for x in used}), "comm_ms": comm, "hidden_ms": hidden,
                  "hidden_fraction": hidden / comm if comm > 0 else None,
                  "sync_wait_ms": sum(x["sync_wait_ms"] for x in used),
                  "backward_ms": sum(x["backward_ms"] for x in used)}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("trace")
    ap.add_argument("--json", help="write rows and totals here")
    ap.add_argument("--include-first", action="store_true", help="count the first step too")
    ap.add_argument("--require-overlap", action="store_true",
                    help="fail unless every step used launched a bucket during its backward pass")
    args = ap.parse_args()
    with open(args.trace) as f:
        events = json.load(f)["traceEvents"]
    rows, total = analyse(events, args.include_first)
    if not rows:
        sys.exit(f"{args.trace}: no steps (no 'optimizer' spans) in the trace")
    print(f"{'rank':>4} {'step':>4} {'backward ms':>12} {'comm ms':>9} {'hidden ms':>10} {'hidden %':>9} "
          f"{'sync wait ms':>13} {'buckets':>8}")
    for x in rows:
        pct = 100 * x["hidden_ms"] / x["comm_ms"] if x["comm_ms"] > 0 else float("nan")
        print(f"{x['rank']:>4} {x['step']:>4} {x['backward_ms']:>12.2f} {x['comm_ms']:>9.2f} {x['hidden_ms']:>10.2f} "
              f"{pct:>8.1f}% {x['sync_wait_ms']:>13.2f} {x['buckets']:>8}")
    if total["hidden_fraction"] is None:
        sys.exit("no all-reduce spans in the steps used (single rank, or no --trace buckets)")
    print(f"total over {total['steps_used']} step(s) x {len({x['rank'] for x in rows})} rank(s): comm "
          f"{total['comm_ms']:.2f} ms, hidden {total['hidden_ms']:.2f} ms = {100 * total['hidden_fraction']:.1f}% "
          f"hidden behind backward; exposed grad sync wait {total['sync_wait_ms']:.2f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "total": total}, f, indent=1)
    if args.require_overlap:
        late = [x for x in rows if (args.include_first or x["step"] > 1) and x["launched_in_backward"] == 0]
        for x in late:
            print(f"FAIL: rank {x['rank']} step {x['step']}: none of its {x['buckets']} bucket(s) was launched "
                  f"during the backward pass (no overlap is possible)")
        if late:
            sys.exit(1)
        print("every step launched buckets during its backward pass")


if __name__ == "__main__":
    main()
