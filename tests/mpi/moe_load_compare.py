#!/usr/bin/python3
"""Golden expert load: every layout must log the same MoE routing as the single process, step by
step ("moe" in each train event of metrics.jsonl: per MoE layer the kept tokens per expert and the
dropped assignments exactly, the mean router entropy within a relative tolerance). A dense run (no
"moe" in the reference) passes with nothing to compare.
  moe_load_compare.py [--entropy-tolerance X] reference=<metrics.jsonl> <label>=<metrics.jsonl> ...
"""
import argparse
import json
import sys


def load(path):
    by_step = {}
    for line in open(path):
        e = json.loads(line)
        if "event" in e or "loss" not in e:
            continue
        for s in [s for s in by_step if s >= e["step"]]:  # a resumed run replaces later steps
            del by_step[s]
        if "moe" in e:
            by_step[e["step"]] = e["moe"]
    return by_step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--entropy-tolerance", type=float, default=1e-5)
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    runs = [r.split("=", 1) for r in a.runs]
    ref_label, ref_path = runs[0]
    ref = load(ref_path)
    if not ref:
        print("no MoE load in %s: nothing to compare" % ref_label)
        return 0
    bad = 0
    for label, path in runs[1:]:
        got = load(path)
        if sorted(got) != sorted(ref):
            print("FAIL: %s logs MoE load at steps %s, the reference at %s" % (label, sorted(got), sorted(ref)))
            bad += 1
            continue
        for step in sorted(ref):
            for r, g in zip(ref[step], got[step]):
                if (r["layer"], r["tokens"], r["dropped"]) != (g["layer"], g["tokens"], g["dropped"]):
                    print("FAIL: step %d layer %d: %s routes tokens %s dropped %d, the reference %s dropped %d" %
                          (step, r["layer"], label, g["tokens"], g["dropped"], r["tokens"], r["dropped"]))
                    bad += 1
                elif abs(g["entropy"] - r["entropy"]) > a.entropy_tolerance * abs(r["entropy"]):
                    print("FAIL: step %d layer %d: %s router entropy %.8f vs %.8f" %
                          (step, r["layer"], label, g["entropy"], r["entropy"]))
                    bad += 1
        if len(got[sorted(ref)[0]]) != len(ref[sorted(ref)[0]]):
            print("FAIL: %s logs %d MoE layers, the reference %d" % (label, len(got[sorted(ref)[0]]),
                                                                   len(ref[sorted(ref)[0]])))
            bad += 1
    if bad:
        return 1
    print("MoE load: %d layouts route like the reference at %d steps" % (len(runs) - 1, len(ref)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
