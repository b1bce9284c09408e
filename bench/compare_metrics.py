#!/usr/bin/python3
# Bitwise comparison of two metrics.jsonl files (written by `tessera train`, see src/observe/metrics.cpp):
# every loss-like value (any key containing "loss": loss, val_loss, val_loss_per_byte) at every step
# must be the same number, compared as the exact text the trainer wrote (shortest round-trip form of
# the double, so equal text <=> equal bits), not within a tolerance.
#   compare_metrics.py LABEL BASE_metrics.jsonl NEW_metrics.jsonl
# Prints one line, "LABEL  IDENTICAL (...)" or "LABEL  DIFFERS (first differing step ...)", and exits
# 0 if identical, 1 if not, 2 if a file is missing or holds no loss at all.
# grad_norm and lr are compared too, but only reported (a note), not part of the verdict.
import json
import sys

TIMING = {"tokens_per_s", "mfu", "mem_mb", "time_s"}


def events(path):
    """[(step, key, raw text)] in file order for loss-like keys, and the same for grad_norm/lr."""
    losses, others = [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            # parse_float/parse_int=str keep the number's exact text as written.
            ev = json.loads(line, parse_float=str, parse_int=str)
            step = int(ev.get("step", -1))
            for k, v in ev.items():
                if k == "step" or k in TIMING:
                    continue
                raw = "null" if v is None else str(v)
                if "loss" in k:
                    losses.append((step, k, raw))
                elif k in ("grad_norm", "lr"):
                    others.append((step, k, raw))
    return losses, others


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def describe(a, b, i):
    if i >= len(a):
        return f"step {b[i][0]}: {b[i][1]} only in NEW ({len(a)} vs {len(b)} values)"
    if i >= len(b):
        return f"step {a[i][0]}: {a[i][1]} only in BASE ({len(a)} vs {len(b)} values)"
    (sa, ka, va), (sb, kb, vb) = a[i], b[i]
    if (sa, ka) != (sb, kb):
        return f"step {sa}: BASE logged {ka}@{sa}, NEW logged {kb}@{sb}"
    return f"step {sa}: {ka} BASE {va} vs NEW {vb}"


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: compare_metrics.py LABEL BASE_metrics.jsonl NEW_metrics.jsonl")
    label, pa, pb = sys.argv[1:]
    try:
        (la, oa), (lb, ob) = events(pa), events(pb)
    except (OSError, ValueError) as e:
        print(f"{label:<24} ERROR ({e})")
        sys.exit(2)
    if not la or not lb:
        print(f"{label:<24} ERROR (no loss values in {pa if not la else pb})")
        sys.exit(2)
    i = first_difference(la, lb)
    steps = sorted({s for s, _, _ in la})
    if i is None:
        n_train = sum(1 for _, k, _ in la if k == "loss")
        n_eval = len(la) - n_train
        last = next(v for s, k, v in reversed(la) if k == "loss")
        msg = f"{label:<24} IDENTICAL ({n_train} train losses, {n_eval} eval values, steps {steps[0]}..{steps[-1]}, " \
              f"final loss {last})"
        j = first_difference(oa, ob)
        if j is not None:
            msg += f"\n{'':<24} note: grad_norm/lr differ from {describe(oa, ob, j)}"
        print(msg)
        sys.exit(0)
    print(f"{label:<24} DIFFERS (first differing {describe(la, lb, i)})")
    sys.exit(1)


if __name__ == "__main__":
    main()
