#!/usr/bin/env python3
"""Check the direction of includes between the layers of src/ and that CMake links match them.

Usage: tools/check_layers.py [SRC_DIR]      (default: the repository's src/)

Each folder of src/ is one layer and one CMake library (tessera_<folder>; cli is the `tessera`
executable). The checker
  1. scans src/**/*.h, *.cpp and *.cu for `#include "..."` and reports every include of a layer
     that ALLOWED (below) does not permit;
  2. parses target_link_libraries(...) of the layer's target in src/<layer>/CMakeLists.txt and
     requires the tessera_* libraries it links to be exactly the other layers its sources include
     directly (third-party targets are ignored).
It prints one line per problem and exits 1, or prints a one-line OK summary and exits 0.
Standard library only.
"""
import os
import re
import sys
from pathlib import Path

# The allowed direct includes of each layer (a layer may always include itself).
# Source of truth: shared/DESIGN.md, "The shape of the system" / "Direction of includes":
#   core <- backend <- comm; core, backend <- model, optim, data; model, comm <- parallel;
#   core, comm <- checkpoint; everything <- train <- cli; core <- launch <- cli.
# Deliberate deviations from that line, decided by the lead:
#   - optim may include model: AdamW works over a ParamLayout's flat range (model/param_layout.h).
#   - parallel may include optim (and core, backend) as well as model and comm.
#   - optim may include comm: the fp16 loss scaler's overflow vote is one max all-reduce.
#   - parallel may include data and observe: the micro-batch runners (accumulation, pipeline) pull
#     batches from the loader and mark their phases on the timeline.
#   - config may include parallel: the schema checks a pipeline schedule's name where it parses it.
ALLOWED = {
    "core": [],
    "backend": ["core"],
    "comm": ["core", "backend"],
    "observe": ["core", "backend", "comm"],
    "model": ["core", "backend"],
    "optim": ["core", "backend", "comm", "model"],
    "data": ["core", "backend"],
    "parallel": ["core", "backend", "comm", "model", "optim", "data", "observe"],
    "config": ["core", "backend", "model", "optim", "parallel"],
    "plan": ["core", "backend", "comm", "model", "optim", "parallel", "config"],
    "checkpoint": ["core", "comm"],
    "train": ["core", "backend", "comm", "observe", "model", "optim", "data", "parallel", "config", "plan",
              "checkpoint"],
    "launch": ["core"],
    "cli": ["core", "backend", "comm", "observe", "model", "optim", "data", "parallel", "config", "plan",
            "checkpoint", "train", "launch"],
}
# CMake target of each layer: tessera_<layer>, except cli.
TARGET = {layer: f"tessera_{layer}" for layer in ALLOWED}
TARGET["cli"] = "tessera"
# Link items that are not layers (third-party / helper targets), matched by prefix.
# tessera_cuda is the backend layer's CUDA half (src/backend/cuda/, built when the toolkit is found).
IGNORED_LINK_PREFIXES = ("MPI::", "OpenMP::", "nlohmann_json::", "PkgConfig::", "tessera_dnnl",
                         "Threads::", "GTest", "CUDA::", "tessera_cuda")

SOURCE_SUFFIXES = (".h", ".cpp", ".cu")
INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"')
TLL_RE = re.compile(r"\btarget_link_libraries\s*\(([^)]*)\)", re.IGNORECASE)
KEYWORDS = {"PUBLIC", "PRIVATE", "INTERFACE", "LINK_PUBLIC", "LINK_PRIVATE", "LINK_INTERFACE_LIBRARIES",
            "debug", "optimized", "general"}


def strip_block_comments(text):
    """Blank out /* ... */ comments, keeping newlines so line numbers stay right."""
    return re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.DOTALL)


def strip_cmake_comments(text):
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def include_layer(src, including_file, inc):
    """The layer an include names, or None if it is not a layer (third-party with quotes).

    Like the compiler: first relative to the including file's folder (so a sibling include such as
    "attention_kernels.h" inside backend/cpu/ is the file's own layer), then relative to src/."""
    for base in (including_file.parent, src):
        target = Path(os.path.normpath(base / inc))
        if target.is_file():
            try:
                rel = target.relative_to(src)
            except ValueError:
                return None  # outside src/
            return rel.parts[0] if len(rel.parts) > 1 else None
    first = inc.split("/", 1)[0]
    if "/" in inc and first in ALLOWED:
        return first  # names a layer even if the file does not exist (yet)
    return None


def fmt_allowed(layer):
    return ", ".join(ALLOWED[layer]) if ALLOWED[layer] else "(nothing outside core)"


def main(argv):
    src = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "src"
    src = Path(os.path.abspath(src))
    if not src.is_dir():
        print(f"check_layers: {src} is not a directory", file=sys.stderr)
        return 2
    shown_root = src.parent  # messages name files as src/<layer>/...

    def show(p):
        return p.relative_to(shown_root).as_posix()

    errors = []
    included = {layer: set() for layer in ALLOWED}  # layer -> other layers it includes directly
    n_files = n_includes = 0
    layers_present = set()

    for path in sorted(p for p in src.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file()):
        rel = path.relative_to(src)
        if len(rel.parts) < 2:
            continue  # files directly in src/ (empty.cpp) belong to no layer
        layer = rel.parts[0]
        if layer not in ALLOWED:
            errors.append(f"{show(path)}: folder src/{layer}/ is not a layer in the table of "
                          f"tools/check_layers.py (add it there and to shared/DESIGN.md)")
            continue
        layers_present.add(layer)
        n_files += 1
        text = strip_block_comments(path.read_text(encoding="utf-8", errors="replace"))
        for lineno, line in enumerate(text.splitlines(), start=1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            inc = m.group(1)
            other = include_layer(src, path, inc)
            if other is None:
                continue
            n_includes += 1
            if other == layer:
                continue
            included[layer].add(other)
            if other not in ALLOWED.get(layer, []):
                errors.append(f'{show(path)}:{lineno}: layer \'{layer}\' must not include \'{other}\' '
                              f'("{inc}"); allowed: {fmt_allowed(layer)}')

    for layer in ALLOWED:
        if layer not in layers_present:
            continue
        cmake = src / layer / "CMakeLists.txt"
        if not cmake.is_file():
            errors.append(f"{show(src / layer)}: layer {layer} has no CMakeLists.txt")
            continue
        text = strip_cmake_comments(cmake.read_text(encoding="utf-8", errors="replace"))
        linked = {}  # layer -> line of its first link
        for m in TLL_RE.finditer(text):
            items = m.group(1).split()
            if not items or items[0] != TARGET[layer]:
                continue
            lineno = text.count("\n", 0, m.start()) + 1
            for item in items[1:]:
                if item in KEYWORDS or item.startswith(IGNORED_LINK_PREFIXES):
                    continue
                if item.startswith("tessera_"):
                    other = item[len("tessera_"):]
                    if other in ALLOWED:
                        linked.setdefault(other, lineno)
                    else:
                        errors.append(f"{show(cmake)}:{lineno}: layer {layer} links unknown library {item}")
        for other in sorted(included[layer] - set(linked)):
            errors.append(f"{show(cmake)}: layer {layer} includes {other} but does not link tessera_{other}")
        for other in sorted(set(linked) - included[layer]):
            errors.append(f"{show(cmake)}:{linked[other]}: layer {layer} links tessera_{other} "
                          f"but includes nothing from it")

    if errors:
        for e in errors:
            print(e)
        print(f"check_layers: {len(errors)} problem(s) in {show(src)}/ "
              f"(allowed includes: tools/check_layers.py ALLOWED, shared/DESIGN.md)")
        return 1
    print(f"check_layers: OK: {n_files} files, {n_includes} layer includes in {len(layers_present)} layers "
          f"follow the allowed direction, and each CMake target links exactly the layers it includes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
