#!/usr/bin/python3
"""PyTorch reference fixtures for Tessera's parity tests: a small GPT-2 and a small LLaMA, written
in plain torch with Hugging Face semantics (no `transformers`), computed in float64 and stored as
f32 safetensors (written here by hand: JSON header + numpy bytes, no `safetensors` package).

Per architecture, tests/fixtures/parity_<arch>/ gets
  weights.safetensors   HF names and layouts (GPT-2 Conv1D weights are (in, out)), f32, with the
                        tessera.* metadata that config_from_metadata() reads
  expected.safetensors  logits (B,T,V), loss [1], tokens/targets (B,T) I32 (-1 = ignored target),
                        grad.<hf name> for every parameter, after_adamw.<hf name> after 5 AdamW steps
  config.json           sizes, batch, optimizer settings, and how far a float32 run of the same
                        script lands from the float64 reference (the floor for any f32 tolerance)

Run: /usr/bin/python3 tools/make_parity_fixtures.py [--out tests/fixtures]   (torch 1.13 CPU, numpy)
"""
import argparse
import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

SEED = 1234
B, T = 2, 16
STEPS = 5
ADAMW = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
EPS = 1e-5
ROPE_THETA = 10000.0
NOISE_GRAD = 1e-12  # |grad| below this (but not exactly 0) is rounding noise; see adam_mask

CONFIGS = {
    "gpt2": dict(arch="gpt2", vocab_size=96, max_seq_len=32, n_layer=2, n_head=4, n_kv_head=4, d_model=32,
                 d_ff=128, tied_embeddings=True),
    "llama": dict(arch="llama", vocab_size=96, max_seq_len=32, n_layer=2, n_head=4, n_kv_head=2, d_model=32,
                  d_ff=48, tied_embeddings=False),
}


# ---- parameters (HF names and layouts) ----

def param_shapes(cfg):
    """[(hf name, shape, kind)] in Tessera's layout order; kind in {matrix, embedding, bias, norm}."""
    V, C, Fd, L = cfg["vocab_size"], cfg["d_model"], cfg["d_ff"], cfg["n_layer"]
    HS = C // cfg["n_head"]
    out = []
    if cfg["arch"] == "gpt2":
        out += [("wte.weight", (V, C), "embedding"), ("wpe.weight", (cfg["max_seq_len"], C), "embedding")]
        for i in range(L):
            p = f"h.{i}."
            out += [(p + "ln_1.weight", (C,), "norm"), (p + "ln_1.bias", (C,), "bias"),
                    (p + "attn.c_attn.weight", (C, 3 * C), "matrix"), (p + "attn.c_attn.bias", (3 * C,), "bias"),
                    (p + "attn.c_proj.weight", (C, C), "matrix"), (p + "attn.c_proj.bias", (C,), "bias"),
                    (p + "ln_2.weight", (C,), "norm"), (p + "ln_2.bias", (C,), "bias"),
                    (p + "mlp.c_fc.weight", (C, Fd), "matrix"), (p + "mlp.c_fc.bias", (Fd,), "bias"),
                    (p + "mlp.c_proj.weight", (Fd, C), "matrix"), (p + "mlp.c_proj.bias", (C,), "bias")]
        out += [("ln_f.weight", (C,), "norm"), ("ln_f.bias", (C,), "bias")]
    else:
        NH, NKV = cfg["n_head"], cfg["n_kv_head"]
        out += [("model.embed_tokens.weight", (V, C), "embedding")]
        for i in range(L):
            p = f"model.layers.{i}."
            out += [(p + "input_layernorm.weight", (C,), "norm"),
                    (p + "self_attn.q_proj.weight", (NH * HS, C), "matrix"),
                    (p + "self_attn.k_proj.weight", (NKV * HS, C), "matrix"),
                    (p + "self_attn.v_proj.weight", (NKV * HS, C), "matrix"),
                    (p + "self_attn.o_proj.weight", (C, NH * HS), "matrix"),
                    (p + "post_attention_layernorm.weight", (C,), "norm"),
                    (p + "mlp.gate_proj.weight", (Fd, C), "matrix"),
                    (p + "mlp.up_proj.weight", (Fd, C), "matrix"),
                    (p + "mlp.down_proj.weight", (C, Fd), "matrix")]
        out += [("model.norm.weight", (C,), "norm"), ("lm_head.weight", (V, C), "matrix")]
    return out


def init_params(cfg, gen):
    """f32 values (so the f32 weights file holds exactly what the reference computes with)."""
    params = {}
    for name, shape, kind in param_shapes(cfg):
        x = torch.randn(shape, generator=gen, dtype=torch.float32)
        params[name] = 1.0 + 0.1 * x if kind == "norm" else 0.02 * x
    return params


# ---- models ----

def causal_attention(q, k, v):
    # q (B,NH,T,HS), k/v (B,NH,T,HS) -> (B,NH,T,HS)
    Tq, HS = q.shape[-2], q.shape[-1]
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HS))
    mask = torch.ones(Tq, Tq, dtype=torch.bool).tril()
    att = att.masked_fill(~mask, float("-inf"))
    return torch.softmax(att, dim=-1) @ v


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def gpt2_forward(cfg, P, tokens):
    Bn, Tn = tokens.shape
    C, NH = cfg["d_model"], cfg["n_head"]
    HS = C // NH
    x = P["wte.weight"][tokens] + P["wpe.weight"][:Tn]
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        h = F.layer_norm(x, (C,), P[p + "ln_1.weight"], P[p + "ln_1.bias"], eps=EPS)
        qkv = h @ P[p + "attn.c_attn.weight"] + P[p + "attn.c_attn.bias"]  # Conv1D: x @ W(in,out) + b
        q, k, v = qkv.split(C, dim=2)
        q, k, v = (t.view(Bn, Tn, NH, HS).transpose(1, 2) for t in (q, k, v))
        y = causal_attention(q, k, v).transpose(1, 2).reshape(Bn, Tn, C)
        x = x + y @ P[p + "attn.c_proj.weight"] + P[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), P[p + "ln_2.weight"], P[p + "ln_2.bias"], eps=EPS)
        h = gelu_tanh(h @ P[p + "mlp.c_fc.weight"] + P[p + "mlp.c_fc.bias"])
        x = x + h @ P[p + "mlp.c_proj.weight"] + P[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), P["ln_f.weight"], P["ln_f.bias"], eps=EPS)
    return x @ P["wte.weight"].T  # tied head


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope(x, positions):
    # x (B,H,T,HS); HF LlamaRotaryEmbedding: emb = cat(freqs, freqs), x*cos + rotate_half(x)*sin
    HS = x.shape[-1]
    inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, HS, 2, dtype=torch.float64) / HS))
    freqs = torch.outer(positions.to(torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1).to(x.dtype)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def llama_forward(cfg, P, tokens):
    Bn, Tn = tokens.shape
    C, NH, NKV = cfg["d_model"], cfg["n_head"], cfg["n_kv_head"]
    HS = C // NH
    pos = torch.arange(Tn)
    x = P["model.embed_tokens.weight"][tokens]
    for i in range(cfg["n_layer"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, P[p + "input_layernorm.weight"])
        q = (h @ P[p + "self_attn.q_proj.weight"].T).view(Bn, Tn, NH, HS).transpose(1, 2)
        k = (h @ P[p + "self_attn.k_proj.weight"].T).view(Bn, Tn, NKV, HS).transpose(1, 2)
        v = (h @ P[p + "self_attn.v_proj.weight"].T).view(Bn, Tn, NKV, HS).transpose(1, 2)
        q, k = rope(q, pos), rope(k, pos)
        # grouped-query attention: query head j reads kv head j // (NH/NKV)
        k = k.repeat_interleave(NH // NKV, dim=1)
        v = v.repeat_interleave(NH // NKV, dim=1)
        y = causal_attention(q, k, v).transpose(1, 2).reshape(Bn, Tn, NH * HS)
        x = x + y @ P[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, P[p + "post_attention_layernorm.weight"])
        g = F.silu(h @ P[p + "mlp.gate_proj.weight"].T) * (h @ P[p + "mlp.up_proj.weight"].T)
        x = x + g @ P[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, P["model.norm.weight"])
    return x @ P["lm_head.weight"].T


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)


# ---- the reference run ----

def run(cfg, init, tokens, targets, dtype):
    """Forward + backward at the initial weights, then STEPS AdamW steps on the same batch."""
    forward = gpt2_forward if cfg["arch"] == "gpt2" else llama_forward
    P = {n: t.to(dtype).clone().requires_grad_(True) for n, t in init.items()}
    kinds = {n: k for n, _, k in param_shapes(cfg)}
    # Tessera's ParamInfo.decay: 2-D weight matrices decay; embeddings (incl. tied wte), norms, biases do not.
    decay = [P[n] for n in P if kinds[n] == "matrix"]
    no_decay = [P[n] for n in P if kinds[n] != "matrix"]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": ADAMW["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=ADAMW["lr"], betas=ADAMW["betas"], eps=ADAMW["eps"])
    logits = forward(cfg, P, tokens)
    loss = loss_fn(logits, targets)
    loss.backward()
    out = {"logits": logits.detach(), "loss": loss.detach().reshape(1)}
    out.update({"grad." + n: P[n].grad.detach().clone() for n in P})
    opt.step()
    for _ in range(STEPS - 1):
        opt.zero_grad()
        loss_fn(forward(cfg, P, tokens), targets).backward()
        opt.step()
    out.update({"after_adamw." + n: P[n].detach().clone() for n in P})
    return out


def adam_mask(grad):
    """Elements whose AdamW trajectory is determined by the math rather than by rounding: Adam
    divides the gradient by its own magnitude, so a gradient that is zero in exact arithmetic but
    not in floating point (the key bias of attention: softmax ignores a shift shared by all keys)
    moves its parameter by up to lr per step in a direction set by rounding noise."""
    return (grad.abs() > NOISE_GRAD) | (grad == 0)


def rel_err(a, b):
    a, b = a.double(), b.double()
    nb = b.norm().item()
    return (a - b).norm().item() / (nb if nb > 0 else 1.0)


# ---- safetensors by hand ----

def write_safetensors(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        if arr.dtype == np.float32:
            dtype, data = "F32", arr.astype("<f4", copy=False).tobytes()
        elif arr.dtype == np.int32:
            dtype, data = "I32", arr.astype("<i4", copy=False).tobytes()
        else:
            raise TypeError("%s: unsupported dtype %s" % (name, arr.dtype))
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    os.replace(tmp, path)


def f32(t):
    return t.detach().to(torch.float32).numpy()


def make(arch, out_root):
    cfg = CONFIGS[arch]
    gen = torch.Generator().manual_seed(SEED + (0 if arch == "gpt2" else 1))
    init = init_params(cfg, gen)
    V = cfg["vocab_size"]
    tokens = torch.randint(0, V, (B, T), generator=gen)
    targets = torch.randint(0, V, (B, T), generator=gen)
    targets[0, 3] = -1
    targets[1, T - 1] = -1

    ref = run(cfg, init, tokens, targets, torch.float64)
    single = run(cfg, init, tokens, targets, torch.float32)
    floor = {
        "logits": rel_err(single["logits"], ref["logits"]),
        "loss": rel_err(single["loss"], ref["loss"]),
        "grad_max": max(rel_err(single[k], ref[k]) for k in ref if k.startswith("grad.")),
        "after_adamw_max": max(rel_err(single[k], ref[k]) for k in ref if k.startswith("after_adamw.")),
        "after_adamw_max_masked": max(rel_err(single[k][m], ref[k][m]) for k, m in
                                      ((k, adam_mask(ref["grad." + k[12:]])) for k in ref
                                       if k.startswith("after_adamw."))),
    }

    d = os.path.join(out_root, "parity_" + arch)
    os.makedirs(d, exist_ok=True)
    meta = {"format": "pt", "tessera.name": "parity-" + arch, "tessera.norm_eps": repr(EPS),
            "tessera.rope_theta": repr(ROPE_THETA)}
    for k in ("arch", "vocab_size", "max_seq_len", "n_layer", "n_head", "n_kv_head", "d_model", "d_ff"):
        meta["tessera." + k] = str(cfg[k])
    meta["tessera.tied_embeddings"] = "true" if cfg["tied_embeddings"] else "false"
    write_safetensors(os.path.join(d, "weights.safetensors"),
                      {n: init[n].numpy() for n, _, _ in param_shapes(cfg)}, meta)

    expected = {"logits": f32(ref["logits"]), "loss": f32(ref["loss"]),
                "tokens": tokens.to(torch.int32).numpy(), "targets": targets.to(torch.int32).numpy()}
    for n, _, _ in param_shapes(cfg):
        expected["grad." + n] = f32(ref["grad." + n])
    for n, _, _ in param_shapes(cfg):
        expected["after_adamw." + n] = f32(ref["after_adamw." + n])
    write_safetensors(os.path.join(d, "expected.safetensors"), expected,
                      {"reference": "torch %s float64" % torch.__version__})

    config = dict(cfg)
    config.update({
        "norm_eps": EPS, "rope_theta": ROPE_THETA, "batch": B, "seq_len": T, "seed": SEED, "ignore_index": -1,
        "loss": "mean cross-entropy over targets != -1",
        "adamw": {"steps": STEPS, "lr": ADAMW["lr"], "beta1": ADAMW["betas"][0], "beta2": ADAMW["betas"][1],
                  "eps": ADAMW["eps"], "weight_decay": ADAMW["weight_decay"],
                  "decay": [n for n, _, k in param_shapes(cfg) if k == "matrix"]},
        "reference_dtype": "float64",
        "float32_run_rel_err": floor,
        "notes": ("Relative errors are ||a-b||/||b|| per tensor. The key slice of attn.c_attn.bias (GPT-2) has a "
                  "gradient that is zero in exact arithmetic (softmax is invariant to a shift shared by all keys), "
                  "so its AdamW updates follow rounding noise (up to lr per step): compare after_adamw.* only where "
                  "|grad.*| > %g or grad.* == 0 (after_adamw_max_masked), or allow ~1e-3 on that tensor." % NOISE_GRAD),
    })
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    sizes = {n: os.path.getsize(os.path.join(d, n)) for n in sorted(os.listdir(d))}
    print(arch, "loss %.6f" % ref["loss"].item(), "float32-vs-float64:", floor, "sizes:", sizes)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures"))
    args = ap.parse_args()
    torch.set_num_threads(1)  # same bits on every run
    for arch in CONFIGS:
        make(arch, os.path.normpath(args.out))


if __name__ == "__main__":
    main()
