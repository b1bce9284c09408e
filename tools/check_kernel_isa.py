#!/usr/bin/env python3
"""Checks that one binary can carry both kernel levels safely (src/backend/cpu/kernel_isa.h):
 * a function the linker may merge across objects (weak or global) and that lies outside the kernel
   namespaces (a standard-library template, say) must have the same code in the avx512 copy of a kernel
   source as in its avx2 copy: if the avx512 region changed it, the linker could hand the AVX-512 body to
   code an AVX2 machine runs, and that would die with SIGILL;
 * the avx512 copy really uses AVX-512, the avx2 copy never does;
 * the start-up check (cpu_isa.cpp) has no AVX at all: it must run on CPUs below the baseline.
Usage: check_kernel_isa.py AVX2_OBJECT_DIR AVX512_OBJECT_DIR CPU_ISA_OBJECT   (exit 1 naming each problem)"""
import os
import re
import subprocess
import sys

AVX512 = re.compile(r"%zmm\d|%[xy]mm(1[6-9]|2\d|3[01])\b|%k[1-7]\b")


def run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def mergeable_functions(obj):
    """Names of the weak or global functions an object defines."""
    names = []
    for line in run("nm", "--defined-only", obj).splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in ("W", "T"):
            names.append(parts[2])
    return names


def bodies(obj):
    """symbol -> its instructions without addresses (so equal code compares equal)."""
    out, sym = {}, None
    for line in run("objdump", "-d", "--no-show-raw-insn", "--no-addresses", obj).splitlines():
        m = re.match(r"^<(.+)>:$", line)
        if m:
            sym = m.group(1)
            out[sym] = []
        elif sym and line.strip():
            out[sym].append(re.sub(r"<[^>]*>", "", line).strip())
    return out


def objects(folder):
    found = {}
    for root, _, files in os.walk(folder):
        for f in files:
            if f.endswith(".o"):
                found[f] = os.path.join(root, f)
    return found


def main():
    avx2, avx512, check_obj = objects(sys.argv[1]), objects(sys.argv[2]), sys.argv[3]
    bad, compared, avx512_code = [], 0, 0
    if not avx2 or set(avx2) != set(avx512):
        bad.append(f"the two levels were not built from the same sources: {sorted(avx2)} vs {sorted(avx512)}")
    for name in sorted(set(avx2) & set(avx512)):
        low, high = bodies(avx2[name]), bodies(avx512[name])
        avx512_code += sum(1 for b in high.values() if AVX512.search("\n".join(b)))
        for sym, body in low.items():
            if AVX512.search("\n".join(body)):
                bad.append(f"AVX-512 in the avx2 kernels: {name}: {sym}")
        low_names = set(mergeable_functions(avx2[name]))
        for sym in mergeable_functions(avx512[name]):
            if "isa_avx512" in sym:
                continue
            compared += 1
            if sym not in high or sym not in low:  # an alias (a D1/D2 destructor pair): objdump names one
                if sym not in low_names:
                    bad.append(f"{name}: {sym} exists only in the avx512 copy")
                continue
            if low[sym] != high[sym]:
                bad.append(f"{name}: {sym} (outside the kernel namespace) differs between the avx2 and avx512 "
                           "copies: include its header before kernel_isa_begin.h")
    if avx512_code == 0:
        bad.append("no AVX-512 code in the avx512 kernels: were they built for AVX-512?")
    if re.search(r"\sv[a-z0-9]+\s+.*%[xyz]mm", run("objdump", "-d", "--no-show-raw-insn", check_obj)):
        bad.append(f"AVX instructions in the start-up check {check_obj}")
    for b in bad:
        print(b)
    if bad:
        return 1
    print(f"check_kernel_isa: OK: {avx512_code} AVX-512 functions in the avx512 kernels, {compared} mergeable "
          "functions outside the kernel namespaces identical in both copies, no AVX in the start-up check")
    return 0


if __name__ == "__main__":
    sys.exit(main())
