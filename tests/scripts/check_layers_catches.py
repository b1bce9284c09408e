#!/usr/bin/env python3
"""Shows that tools/check_layers.py can fail: plants violations into copies of src/ and requires the
checker to report them with the expected messages.

Usage: check_layers_catches.py CHECKER SRC_DIR WORK_DIR
Copies only the .h/.cpp/CMakeLists.txt files of SRC_DIR into WORK_DIR/<case>/src (WORK_DIR is wiped
first), then runs these cases:
  control          the unmodified copy: none of the planted messages may appear
  wrong_include    model/transformer.cpp includes "train/trainer.h": a forbidden include and a
                   missing link must be reported, exit status 1
  unneeded_link    model's CMakeLists.txt links tessera_comm: an unneeded link, exit status 1
  sibling_include  model/transformer.cpp includes "config.h" (a sibling, no folder prefix): it is the
                   file's own layer, so the exit status and problems must equal the control's
"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

PLANTED_INCLUDE = '#include "train/trainer.h"'
PLANTED_LINK = "target_link_libraries(tessera_model PUBLIC tessera_comm)"
MSG_MISSING_LINK = "layer model includes train but does not link tessera_train"
MSG_UNNEEDED_LINK = "layer model links tessera_comm but includes nothing from it"
MSG_WRONG_INCLUDE_RE = re.compile(r"src/model/([a-z_]+\.cpp):(\d+): layer 'model' must not include 'train' "
                                  r'\("train/trainer\.h"\); allowed: core, backend$', re.MULTILINE)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}")


def copy_src(src, dest):
    for p in sorted(src.rglob("*")):
        if p.is_file() and (p.suffix in (".h", ".cpp") or p.name == "CMakeLists.txt"):
            target = dest / p.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, target)


def model_cpp(src_copy):
    """The model file to plant into: transformer.cpp, or (if it was renamed) the first model .cpp."""
    preferred = src_copy / "model" / "transformer.cpp"
    if preferred.is_file():
        return preferred
    cpps = sorted((src_copy / "model").glob("*.cpp"))
    if not cpps:
        sys.exit(f"no .cpp in {src_copy / 'model'} to plant an include into")
    return cpps[0]


def plant_include(path, include_line):
    """Inserts include_line after the file's last #include; returns its 1-based line number."""
    lines = path.read_text().splitlines(keepends=True)
    last = max((i for i, l in enumerate(lines) if l.lstrip().startswith("#include")), default=-1)
    lines.insert(last + 1, include_line + "\n")
    path.write_text("".join(lines))
    return last + 2


def run(checker, src_copy, case):
    r = subprocess.run([sys.executable, str(checker), str(src_copy)], capture_output=True, text=True)
    out = r.stdout + r.stderr
    print(f"--- case {case}: exit status {r.returncode}")
    print(out, end="" if out.endswith("\n") or not out else "\n")
    return r.returncode, out


def problems(out):
    """The checker's report without its summary line (which counts files and includes)."""
    return [l for l in out.splitlines() if not l.startswith("check_layers:")]


def layer_includes(out):
    m = re.search(r"check_layers: OK: \d+ files, (\d+) layer includes", out)
    return int(m.group(1)) if m else None


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__)
    checker, src, work = Path(argv[1]).resolve(), Path(argv[2]).resolve(), Path(argv[3]).resolve()
    if work.exists():
        shutil.rmtree(work)

    cases = {}
    for case in ("control", "wrong_include", "unneeded_link", "sibling_include"):
        cases[case] = work / case / "src"
        copy_src(src, cases[case])

    rc_control, out_control = run(checker, cases["control"], "control")
    check(MSG_WRONG_INCLUDE_RE.search(out_control) is None and MSG_MISSING_LINK not in out_control
          and MSG_UNNEEDED_LINK not in out_control,
          "control: the unmodified copy already reports one of the planted messages")

    planted = model_cpp(cases["wrong_include"])
    line = plant_include(planted, PLANTED_INCLUDE)
    rc, out = run(checker, cases["wrong_include"], "wrong_include")
    check(rc == 1, f"wrong_include: exit status {rc}, expected 1")
    m = MSG_WRONG_INCLUDE_RE.search(out)
    check(m is not None, "wrong_include: no \"layer 'model' must not include 'train' (\"train/trainer.h\"); "
                         "allowed: core, backend\" line")
    if m:
        check(m.group(1) == planted.name and int(m.group(2)) == line,
              f"wrong_include: reported {m.group(1)}:{m.group(2)}, planted at {planted.name}:{line}")
    check(MSG_MISSING_LINK in out, f"wrong_include: no '{MSG_MISSING_LINK}'")

    cmake = cases["unneeded_link"] / "model" / "CMakeLists.txt"
    cmake.write_text(cmake.read_text().rstrip("\n") + "\n" + PLANTED_LINK + "\n")
    rc, out = run(checker, cases["unneeded_link"], "unneeded_link")
    check(rc == 1, f"unneeded_link: exit status {rc}, expected 1")
    check(MSG_UNNEEDED_LINK in out, f"unneeded_link: no '{MSG_UNNEEDED_LINK}'")

    plant_include(model_cpp(cases["sibling_include"]), '#include "config.h"')
    rc, out = run(checker, cases["sibling_include"], "sibling_include")
    check((rc, problems(out)) == (rc_control, problems(out_control)),
          "sibling_include: a sibling include without folder prefix changed the result")
    n_control, n_sibling = layer_includes(out_control), layer_includes(out)
    if n_control is not None:  # the control passed: its OK line counts the includes of layer files
        check(n_sibling == n_control + 1,
              f"sibling_include: {n_sibling} layer includes, expected {n_control} + 1 (\"config.h\" resolved "
              f"next to the including file, as model/config.h)")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("check_layers.py reports the planted include and links, and ignores a sibling include")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
