#!/usr/bin/env python3
"""Checks `tessera export --hf` against Hugging Face transformers itself: trains a tiny GPT-2 (byte
tokenizer) and a tiny LLaMA (SentencePiece BPE tokenizer), each tied and untied, for a few steps, exports each with
`tessera export --hf DIR`, opens DIR with AutoModelForCausalLM.from_pretrained, runs the same token
ids through transformers and through Tessera (`tessera logits`) and compares the logits
(max |diff| <= 1e-4), and checks that AutoTokenizer encodes sample strings to Tessera's ids.

Not part of the build or CI (it needs transformers from PyPI). Set up once:
  python3 -m venv --system-site-packages /tmp/hfvenv     # reuses Debian's python3-torch 1.13
  /tmp/hfvenv/bin/pip install -r tools/requirements-hf-check.txt
Run:
  /tmp/hfvenv/bin/python tools/check_hf_export.py --tessera build/src/cli/tessera
Also runs with transformers 5 (measured: 5.24.0, tokenizers 0.23.3, PyTorch 2.15 from PyPI, in a plain venv:
`pip install torch transformers tokenizers safetensors sentencepiece protobuf`). transformers 5 ignores
`use_fast=False`: AutoTokenizer then always returns the tokenizers-backed LlamaTokenizer converted from
tokenizer.model, never SentencePiece itself; the tokenizer lines say which backend was checked.
Exit status 0 when every check passes; the measured differences are printed either way.
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file

TOLERANCE = 1e-4
SAMPLES = ["in the beginning god created the heaven and the earth",
           "  leading spaces, double  spaces and a tab\tthen\nnew lines\n\n",
           "digits 12345 and punctuation: (a, b); c!",
           "unicode: caf\u00e9, na\u00efve, \u2014 dash, \u4e2d\u6587, emoji \U0001F600"]


def run(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def make_corpus(path, lines=400, seed=1):
    rng = random.Random(seed)
    words = ("in the beginning god created heaven and earth light was good day night waters "
             "caf\u00e9 12 345 , . ; !").split()
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(lines):
            f.write(" ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) + "\n")


def tessera_logits(tessera, run_dir, out, ids=None, text=None):
    args = [tessera, "logits", "--run", run_dir, "--out", out, "--threads", "1"]
    args += ["--ids", ",".join(map(str, ids))] if ids is not None else ["--text", text]
    run(*args)
    t = load_file(out)
    return t["tokens"].to(torch.int64).tolist(), t["logits"].to(torch.float64)


def transformers_major():
    import transformers
    return int(transformers.__version__.split(".")[0])


def check_model(tessera, work, name, run_dir, hf_dir, vocab, T):
    from transformers import AutoModelForCausalLM
    # transformers 5 renamed torch_dtype to dtype (the old name warns); 4.x only knows torch_dtype.
    dtype_arg = "dtype" if transformers_major() >= 5 else "torch_dtype"
    model = AutoModelForCausalLM.from_pretrained(hf_dir, **{dtype_arg: torch.float32})
    model.eval()
    rng = random.Random(7)
    worst = 0.0
    cases = [("random ids, full context", [rng.randrange(vocab) for _ in range(T)]),
             ("random ids, 5 tokens", [rng.randrange(vocab) for _ in range(5)])]
    for label, ids in cases:
        _, ours = tessera_logits(tessera, run_dir, os.path.join(work, f"{name}.logits"), ids=ids)
        with torch.no_grad():
            theirs = model(torch.tensor([ids])).logits[0].to(torch.float64)
        d = (ours - theirs).abs().max().item()
        worst = max(worst, d)
        print(f"  {name}: {label}: max |logit diff| = {d:.3e} (logit scale {theirs.abs().max().item():.3g})")
    return worst


def check_tokenizer(tessera, work, name, run_dir, hf_dir, use_fast):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(hf_dir, use_fast=use_fast)
    bad = []
    for s in SAMPLES:
        ours, _ = tessera_logits(tessera, run_dir, os.path.join(work, f"{name}.tok"), text=s)
        theirs = tok(s, add_special_tokens=True)["input_ids"]
        if ours != theirs:
            bad.append((s, ours[:12], theirs[:12]))
    # Which implementation was checked: SentencePiece itself (a slow tokenizer) or a tokenizers-library one.
    # transformers 5 drops use_fast and always returns the latter.
    backend = "tokenizers library" if tok.is_fast else "Python/SentencePiece"
    ignored = ", use_fast ignored by this transformers" if (not use_fast and tok.is_fast) else ""
    kind = f"{type(tok).__name__} (use_fast={use_fast}: {backend}{ignored})"
    print(f"  {name}: AutoTokenizer {kind}: "
          + ("same ids as Tessera on every sample" if not bad else f"DIFFERS on {len(bad)} of {len(SAMPLES)} samples"))
    for s, o, t in bad[:2]:
        print(f"    {s!r}: tessera {o}... transformers {t}...")
    return not bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tessera", default="build/src/cli/tessera")
    ap.add_argument("--src", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    import transformers
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    tessera = os.path.abspath(a.tessera)
    config = os.path.join(a.src, "configs", "tiny.toml")
    work = tempfile.mkdtemp(prefix="tessera_hfcheck_")
    corpus = os.path.join(work, "corpus.txt")
    make_corpus(corpus)
    run(tessera, "prepare", corpus, "--out", os.path.join(work, "byte"), "--tokenizer", "byte", "--val-fraction", "0.1")
    run(tessera, "prepare", corpus, "--out", os.path.join(work, "bpe"), "--tokenizer", "bpe", "--vocab-size", "300",
        "--val-fraction", "0.1")
    common = [f"train.steps={a.steps}", "train.eval_interval=0", "train.threads=1", "--quiet"]
    models = {
        # name: (dataset, overrides, vocab, T, tokenizer loading that must match exactly)
        "gpt2": ("byte", ["model.preset=tiny"], 256, 64, True),
        "llama": ("bpe", ["model.preset=tiny-llama", "model.vocab_size=320"], 320, 64, False),
        # The other embedding choice of each family: an untied lm_head.weight / a tied LLaMA.
        "gpt2-untied": ("byte", ["model.preset=tiny", "model.tied_embeddings=false"], 256, 64, True),
        "llama-tied": ("bpe", ["model.preset=tiny-llama", "model.vocab_size=320", "model.tied_embeddings=true"],
                       320, 64, False),
    }
    ok = True
    results = {}
    for name, (data, overrides, vocab, T, exact_fast) in models.items():
        run_dir, hf_dir = os.path.join(work, f"run_{name}"), os.path.join(work, f"{name}.hf")
        run(tessera, "train", "--config", config, f"data.dir={os.path.join(work, data)}", f"train.out_dir={run_dir}",
            *overrides, *common)
        print(run(tessera, "export", "--run", run_dir, "--hf", hf_dir).rstrip())
        try:
            worst = check_model(tessera, work, name, run_dir, hf_dir, vocab, T)
        except Exception as e:  # transformers refusing the directory is a failed check, not a crash
            print(f"  {name}: transformers cannot load or run {hf_dir}: {type(e).__name__}: {e}")
            worst = float("inf")
        results[name] = worst
        ok &= worst <= TOLERANCE
        # The documented way must match exactly; the other is reported.
        ok &= check_tokenizer(tessera, work, name, run_dir, hf_dir, use_fast=exact_fast)
        check_tokenizer(tessera, work, name, run_dir, hf_dir, use_fast=not exact_fast)
    print("max |logit diff|: " + ", ".join(f"{n} {d:.3e}" for n, d in results.items()) + f" (tolerance {TOLERANCE:g})")
    if not a.keep:
        subprocess.run(["rm", "-rf", work])
    else:
        print(f"work directory kept: {work}")
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
