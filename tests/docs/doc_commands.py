#!/usr/bin/env python3
"""Runs every command of the README and docs/ as written, so that an example cannot rot.

    doc_commands.py <tessera binary> <source dir> <work dir> [--data DIR] [--list] [FILE.md ...]

Every ```bash block of README.md and docs/*.md runs in one bash process (`set -e`, so variables a
block sets stay set for its later lines) inside a sandbox made once per file: `configs/`, `scripts/`,
`bench/` of the source tree, `build/` whose `src/cli/tessera` is the binary, a prepared byte-level
dataset as `data/kjv` and `data/kjv-bpe`, `run.toml` (configs/tiny.toml), a few text files, and on
the PATH `tessera` plus `mpirun`/`mpiexec` with this machine's flags (--allow-run-as-root
--oversubscribe) and `srun [-n N]` played by mpirun. The harness applies two things a reader would
not type: `train.steps` is capped (20, the tiny config's own length, for tiny models; 3 for bigger
ones) and every run gets `train.threads=1`, so the whole set takes a few minutes on 2 cores.

A block that cannot run here says so just above it, with the reason:
    <!-- doc-test: skip needs root and network namespaces -->
and the harness lists every skipped block with its reason. A block that fails names the file, the
line of the block and the output.
"""
import os
import random
import re
import shutil
import stat
import subprocess
import sys
import time

SKIP = re.compile(r"<!--\s*doc-test:\s*skip\s+(.+?)\s*-->")
FENCE = re.compile(r"^```(\w*)\s*$")


def blocks(path):
    """(first line number, language, text, skip reason or None) of each fenced block."""
    out, lines = [], open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i + 1
        j = start
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        before = "\n".join(lines[max(0, i - 3):i])
        skip = SKIP.search(before)
        out.append((start + 1, lang, "\n".join(lines[start:j]), skip.group(1) if skip else None))
        i = j + 1
    return out


def word_soup(files, lines=6000):
    """Texts varied enough for a SentencePiece BPE of 8192 pieces (a made-up vocabulary of 30000 words)."""
    rng = random.Random(1)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    words = ["".join(rng.choice(letters[:rng.randint(8, 26)]) for _ in range(rng.randint(2, 11))) for _ in range(30000)]
    return ["\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(5, 14))) for _ in range(lines)) + "\n"
            for _ in range(files)]


def write_exec(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def make_sandbox(root, tessera, src, data):
    os.makedirs(root)
    for d in ("configs", "scripts", "bench", "tools"):
        os.symlink(os.path.join(src, d), os.path.join(root, d))
    # build/ mirrors the real build directory (cmake --install and cpack work in it), except that
    # build/src/cli/tessera is the wrapper below.
    real_build = os.path.dirname(os.path.dirname(os.path.dirname(tessera)))  # <build>/src/cli/tessera
    for sub in ("", "src", "src/cli"):
        os.makedirs(os.path.join(root, "build", sub), exist_ok=True)
        for entry in os.listdir(os.path.join(real_build, sub)):
            if (sub, entry) in (("", "src"), ("src", "cli"), ("src/cli", "tessera")):
                continue
            os.symlink(os.path.join(real_build, sub, entry), os.path.join(root, "build", sub, entry))
    bin_dir = os.path.join(root, ".bin")
    os.makedirs(bin_dir)
    # The trainer's step cap goes last, so it wins over the example's own train.steps: the tiny
    # config keeps its own 20 steps (examples name its step_00000020), bigger models run 3.
    wrapper = f"""#!/bin/bash
if [ "$1" = train ]; then
  steps=3
  for ((i = 1; i < $#; i++)); do
    if [ "${{!i}}" = --config ]; then j=$((i + 1)); grep -qs 'preset = "tiny"' "${{!j}}" && steps=20; fi
  done
  exec {tessera} "$@" train.steps=$steps train.threads=1
fi
exec {tessera} "$@"
"""
    write_exec(os.path.join(root, "build/src/cli/tessera"), wrapper)
    write_exec(os.path.join(bin_dir, "tessera"), wrapper)
    mpirun = shutil.which("mpirun") or "mpirun"
    for name in ("mpirun", "mpiexec"):
        write_exec(os.path.join(bin_dir, name),
                   f'#!/bin/bash\nexec {mpirun} --allow-run-as-root --oversubscribe "$@"\n')
    # srun [-n N]: without -n, the allocation's tasks ($SLURM_NTASKS; 2 here).
    write_exec(os.path.join(bin_dir, "srun"),
               f'#!/bin/bash\nn=${{SLURM_NTASKS:-2}}\nif [ "$1" = -n ]; then n=$2; shift 2; fi\n'
               f'exec {mpirun} --allow-run-as-root --oversubscribe -np "$n" "$@"\n')
    os.makedirs(os.path.join(root, "data"))
    for name in ("kjv", "kjv-bpe"):
        os.symlink(data, os.path.join(root, "data", name))
    shutil.copy(os.path.join(src, "configs/tiny.toml"), os.path.join(root, "run.toml"))
    os.makedirs(os.path.join(root, "my_texts"))
    for p, text in zip(("my_texts/a.txt", "my_texts/b.txt", "notes.txt"), word_soup(3)):
        with open(os.path.join(root, p), "w") as f:
            f.write(text)
    with open(os.path.join(root, "hosts.txt"), "w") as f:
        f.write("localhost slots=8\n")
    return bin_dir


def run_block(sandbox, bin_dir, text, timeout):
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"], OMP_NUM_THREADS="1")
    script = "set -euo pipefail\ncd " + sandbox + "\n" + text.replace("<date>", "doctest") + "\n"
    return subprocess.run(["bash", "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)


def main():
    args = sys.argv[1:]
    listing = "--list" in args
    args = [a for a in args if a != "--list"]
    data = None
    if "--data" in args:
        k = args.index("--data")
        data = os.path.abspath(args[k + 1])
        del args[k:k + 2]
    tessera, src, work = os.path.abspath(args[0]), os.path.abspath(args[1]), os.path.abspath(args[2])
    files = args[3:] or ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(src, "docs"))
                                                if f.endswith(".md"))
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    if data is None:  # one small byte-level dataset for every sandbox
        data = os.path.join(work, "dataset")
        with open(data + ".txt", "w") as f:
            f.write("".join(f"{i} and god said let there be light and there was light\n" for i in range(20000)))
        subprocess.run([tessera, "prepare", data + ".txt", "--out", data, "--tokenizer", "byte"], check=True,
                       stdout=subprocess.DEVNULL)
    failures, skipped, ran = [], [], 0
    for rel in files:
        path = os.path.join(src, rel)
        todo = [b for b in blocks(path) if b[1] in ("bash", "sh")]
        if not todo:
            continue
        sandbox = os.path.join(work, rel.replace("/", "_"))
        bin_dir = make_sandbox(sandbox, tessera, src, data)
        for line, _, text, skip in todo:
            where = f"{rel}:{line}"
            if skip:
                skipped.append(f"{where}: {skip}")
                continue
            if listing:
                print(f"== {where}\n{text}")
                continue
            t0 = time.time()
            try:
                r = run_block(sandbox, bin_dir, text, timeout=300)
                ok, out = r.returncode == 0, r.stdout
            except subprocess.TimeoutExpired as e:
                ok, out = False, (e.stdout or "") + "\n(timed out after 300 s)"
            ran += 1
            print(f"{'ok  ' if ok else 'FAIL'} {where} ({time.time() - t0:.1f} s)", flush=True)
            if not ok:
                failures.append(where)
                print("     " + "\n     ".join(text.split("\n")))
                print("     output (last 40 lines):\n       " + "\n       ".join(out.strip().split("\n")[-40:]))
    for s in skipped:
        print(f"skip {s}")
    print(f"{ran} blocks ran, {len(failures)} failed, {len(skipped)} skipped (each with its reason above)")
    if failures:
        print("FAIL: these documented commands do not work as written: " + ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
