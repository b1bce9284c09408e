#!/usr/bin/python3
# Compares the train-loss curves in metrics.jsonl files: every run must log the same steps, and each
# step's loss and pre-clip gradient norm must match the first (reference) run within a relative
# tolerance (clipping and AdamW hide a constant gradient scale from the loss; the norm shows it).
# With --val, the validation losses too (every run must have evaluated at the same steps).
#   dp_compare_losses.py --steps N --tolerance TOL [--grad-norm-tolerance TOL] [--val] label=metrics.jsonl ...
import argparse
import json
import sys


def losses(path, key="loss"):
    out = {}
    with open(path) as f:
        for line in f:
            ev = json.loads(line)
            if key in ev and "step" in ev:
                out[ev["step"]] = ev[key]
    return out


def compare_val(args):
    """Validation losses: same eval steps in every run, each within the tolerance of the reference."""
    runs = [(r.split("=", 1)[0], losses(r.split("=", 1)[1], "val_loss")) for r in args.runs]
    ref_label, ref = runs[0]
    if not ref:
        print(f"FAIL: {ref_label} logged no validation loss")
        return True
    fail = False
    for label, curve in runs[1:]:
        if sorted(curve) != sorted(ref):
            print(f"FAIL: {label} evaluated at steps {sorted(curve)}, {ref_label} at {sorted(ref)}")
            fail = True
            continue
        for s in sorted(ref):
            d = abs(curve[s] - ref[s]) / abs(ref[s])
            print(f"val step {s}: {label} rel.diff {d:.2e}")
            if not d <= args.tolerance:
                print(f"FAIL: step {s}: {label} val loss differs from {ref_label} by {d:.2e} (relative) > {args.tolerance:g}")
                fail = True
    return fail


def compare_grad_norms(args, tol):
    """The logged pre-clip gradient norm of every step, each within tol of the reference: the first
    run, or from --grad-norm-reference on, that run (a strategy that logs another norm, e.g. local
    SGD's per-replica one, is compared with its own kind)."""
    runs = [(r.split("=", 1)[0], losses(r.split("=", 1)[1], "grad_norm")) for r in args.runs]
    ref_label, ref = runs[0]
    fail = False
    worst = 0.0
    for label, curve in runs[1:]:
        if label == args.grad_norm_reference:
            ref_label, ref = label, curve
            continue
        for s in range(1, args.steps + 1):
            if curve.get(s) is None or ref.get(s) is None:
                print(f"FAIL: step {s}: {label} or {ref_label} logged no grad_norm")
                fail = True
                continue
            d = abs(curve[s] - ref[s]) / abs(ref[s])
            worst = max(worst, d)
            if not d <= tol:
                print(f"FAIL: step {s}: {label} grad_norm {curve[s]:.7g} differs from {ref_label}'s {ref[s]:.7g} "
                      f"by {d:.2e} (relative) > {tol:g}")
                fail = True
    print(f"worst relative grad_norm difference {worst:.2e} (tolerance {tol:g})")
    return fail


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--tolerance", type=float, required=True)
    ap.add_argument("--grad-norm-tolerance", help="relative, per step (default: --tolerance); 'off' skips")
    ap.add_argument("--grad-norm-reference", help="this run and those after it: grad norms against this run")
    ap.add_argument("--val", action="store_true", help="also compare the validation losses")
    ap.add_argument("runs", nargs="+")
    args = ap.parse_args()
    runs = [(r.split("=", 1)[0], losses(r.split("=", 1)[1])) for r in args.runs]
    ref_label, ref = runs[0]
    fail = False
    for label, curve in runs:
        if sorted(curve) != list(range(1, args.steps + 1)):
            print(f"FAIL: {label} logged steps {sorted(curve)}, expected 1..{args.steps}")
            fail = True
    if fail:
        sys.exit(1)
    print(f"{'step':>4} {ref_label + ' loss':>14} " + " ".join(f"{l + ' rel.diff':>16}" for l, _ in runs[1:]))
    worst = 0.0
    for s in range(1, args.steps + 1):
        diffs = [abs(c[s] - ref[s]) / abs(ref[s]) for _, c in runs[1:]]
        worst = max([worst] + diffs)
        print(f"{s:>4} {ref[s]:>14.7f} " + " ".join(f"{d:>16.2e}" for d in diffs))
        for (label, _), d in zip(runs[1:], diffs):
            if not d <= args.tolerance:
                print(f"FAIL: step {s}: {label} loss differs from {ref_label} by {d:.2e} (relative) > {args.tolerance:g}")
                fail = True
    # The curve must actually move, or equal curves would prove nothing.
    if not ref[args.steps] < ref[1] - 0.1:
        print(f"FAIL: the reference loss did not fall ({ref[1]:.4f} -> {ref[args.steps]:.4f})")
        fail = True
    print(f"worst relative difference {worst:.2e} (tolerance {args.tolerance:g})")
    grad_tol = args.grad_norm_tolerance
    if grad_tol != "off" and compare_grad_norms(args, args.tolerance if grad_tol is None else float(grad_tol)):
        fail = True
    if args.val and compare_val(args):
        fail = True
    if fail:
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
