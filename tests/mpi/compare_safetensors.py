#!/usr/bin/python3
# Compares two safetensors files (f32): same tensor names and shapes, and every element within
# tol x the largest magnitude of the whole reference model (max |a - b| <= tol * max over all |a|).
# Per-tensor scales would be wrong: the attention key bias has an exactly-zero gradient in theory,
# so Adam turns rounding noise (which differs between layouts) into lr-sized steps on tiny values.
#   compare_safetensors.py --tolerance TOL reference.safetensors other.safetensors
import argparse
import array
import json
import struct
import sys


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    out = {}
    for name, info in header.items():
        if info["dtype"] != "F32":
            sys.exit(f"FAIL: {path}: {name} is {info['dtype']}, only F32 is compared")
        lo, hi = info["data_offsets"]
        values = array.array("f")
        values.frombytes(body[lo:hi])
        out[name] = (info["shape"], values)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tolerance", type=float, required=True)
    ap.add_argument("reference")
    ap.add_argument("other")
    args = ap.parse_args()
    ref, other = load(args.reference), load(args.other)
    if sorted(ref) != sorted(other):
        sys.exit(f"FAIL: tensor names differ: {sorted(set(ref) ^ set(other))}")
    worst, worst_name = 0.0, ""
    scale = max(max(abs(x) for x in a) for _, a in ref.values())
    for name, (shape, a) in ref.items():
        oshape, b = other[name]
        if shape != oshape:
            sys.exit(f"FAIL: {name}: shape {oshape}, reference {shape}")
        diff = max(abs(x - y) for x, y in zip(a, b)) / scale
        if not diff <= args.tolerance:
            sys.exit(f"FAIL: {name}: differs by {diff:.2e} of the model's largest magnitude ({scale:.3g}) > {args.tolerance:g}")
        if diff >= worst:
            worst, worst_name = diff, name
    print(f"{args.other}: {len(ref)} tensors match, worst {worst:.2e} ({worst_name})")


if __name__ == "__main__":
    main()
