#!/usr/bin/python3
"""PyTorch reference fixtures for Tessera's mixture-of-experts layers: a small LLaMA whose MLPs are
Mixtral sparse-MoE blocks (Hugging Face MixtralSparseMoeBlock semantics, written in plain torch),
computed in float64 and stored as f32 safetensors with Mixtral tensor names.

Router: softmax over the experts in float, top-k, the k weights divided by their sum (Mixtral).
Load-balancing loss per MoE layer: HF's load_balancing_loss_func on that layer's router logits,
E * sum_e (tokens routed to e / N) * mean_n p[n, e]; z-loss: mean_n logsumexp(logits_n)^2.
Objective = cross-entropy + sum over MoE layers (aux_coef * lb + z_coef * z). Capacity (when
capacity_factor > 0): each expert keeps ceil(cf * N * K / E) assignments, first choices before
second choices, each in token order; dropped assignments contribute nothing.

Per fixture, tests/fixtures/parity_<name>/ gets weights.safetensors (HF names, tessera.* metadata),
expected.safetensors (logits, loss = the objective, ce, grad.<hf name>, tokens/targets, and per MoE
layer tokens_per_expert.<layer> and dropped.<layer> as I32) and config.json.

Run: /usr/bin/python3 tools/make_moe_parity_fixtures.py [--out tests/fixtures]   (torch 1.13 CPU, numpy)
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_parity_fixtures import (EPS, ROPE_THETA, causal_attention, f32, rel_err, rms_norm, rope,  # noqa: E402
                                  write_safetensors)

SEED = 4321
B, T = 2, 16
BASE = dict(arch="llama", vocab_size=96, max_seq_len=32, n_layer=2, n_head=4, n_kv_head=2, d_model=32, d_ff=24,
            tied_embeddings=False, moe_experts=4, moe_top_k=2, moe_aux_loss=0.02, moe_z_loss=0.001)
CONFIGS = {
    "moe": dict(BASE, moe_capacity_factor=0.0, moe_shared_expert=False, moe_every=1),
    # layer 0: MoE with a shared expert and capacity dropping; layer 1: dense
    "moe_capacity": dict(BASE, moe_capacity_factor=1.0, moe_shared_expert=True, moe_every=2),
}


def is_moe_layer(cfg, i):
    return i % cfg["moe_every"] == 0


def param_shapes(cfg):
    V, C, Fd, L, E = cfg["vocab_size"], cfg["d_model"], cfg["d_ff"], cfg["n_layer"], cfg["moe_experts"]
    NH, NKV = cfg["n_head"], cfg["n_kv_head"]
    HS = C // NH
    out = [("model.embed_tokens.weight", (V, C), "embedding")]
    for i in range(L):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (C,), "norm"),
                (p + "self_attn.q_proj.weight", (NH * HS, C), "matrix"),
                (p + "self_attn.k_proj.weight", (NKV * HS, C), "matrix"),
                (p + "self_attn.v_proj.weight", (NKV * HS, C), "matrix"),
                (p + "self_attn.o_proj.weight", (C, NH * HS), "matrix"),
                (p + "post_attention_layernorm.weight", (C,), "norm")]
        moe = is_moe_layer(cfg, i)
        if not moe or cfg["moe_shared_expert"]:
            m = p + ("mlp.shared_expert." if moe else "mlp.")
            out += [(m + "gate_proj.weight", (Fd, C), "matrix"), (m + "up_proj.weight", (Fd, C), "matrix"),
                    (m + "down_proj.weight", (C, Fd), "matrix")]
        if moe:
            out += [(p + "block_sparse_moe.gate.weight", (E, C), "router")]
            for e in range(E):
                x = p + f"block_sparse_moe.experts.{e}."
                out += [(x + "w1.weight", (Fd, C), "matrix"), (x + "w3.weight", (Fd, C), "matrix"),
                        (x + "w2.weight", (C, Fd), "matrix")]
    out += [("model.norm.weight", (C,), "norm"), ("lm_head.weight", (V, C), "matrix")]
    return out


def init_params(cfg, gen):
    params = {}
    for name, shape, kind in param_shapes(cfg):
        x = torch.randn(shape, generator=gen, dtype=torch.float32)
        # A router of std 0.5 gives uneven routing (so capacity drops) and gradients well above rounding.
        params[name] = 1.0 + 0.1 * x if kind == "norm" else (0.5 if kind == "router" else 0.05) * x
    return params


def swiglu(x, w_gate, w_up, w_down):
    return (F.silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


def moe_block(cfg, P, p, h, stats):
    """Mixtral's sparse MoE block on h (B,T,C), with Tessera's capacity rule; returns (B,T,C)."""
    Bn, Tn, C = h.shape
    E, K = cfg["moe_experts"], cfg["moe_top_k"]
    x = h.reshape(-1, C)
    N = x.shape[0]
    logits = x @ P[p + "block_sparse_moe.gate.weight"].T
    probs = torch.softmax(logits, dim=1)
    w, idx = torch.topk(probs, K, dim=-1)
    w = w / w.sum(dim=-1, keepdim=True)
    keep = torch.ones(N, K, dtype=torch.bool)
    cf = cfg["moe_capacity_factor"]
    if cf > 0:
        cap = max(1, math.ceil(cf * N * K / E))
        taken = [0] * E
        for k in range(K):
            for n in range(N):
                e = int(idx[n, k])
                if taken[e] >= cap:
                    keep[n, k] = False
                else:
                    taken[e] += 1
    out = torch.zeros_like(x)
    tokens = []
    for e in range(E):
        n_sel, k_sel = torch.nonzero((idx == e) & keep, as_tuple=True)
        tokens.append(len(n_sel))
        if len(n_sel) == 0:
            continue
        q = p + f"block_sparse_moe.experts.{e}."
        y = swiglu(x[n_sel], P[q + "w1.weight"], P[q + "w3.weight"], P[q + "w2.weight"])
        out = out.index_add(0, n_sel, y * w[n_sel, k_sel].unsqueeze(-1))
    routed = F.one_hot(idx, E).sum(dim=(0, 1)).to(probs.dtype)  # constant: no gradient through the choice
    lb = E * torch.sum(routed / N * probs.mean(dim=0))
    z = torch.logsumexp(logits, dim=-1).pow(2).mean()
    stats.append(dict(tokens=tokens, dropped=int((~keep).sum()), aux=cfg["moe_aux_loss"] * lb + cfg["moe_z_loss"] * z))
    return out.view(Bn, Tn, C)


def forward(cfg, P, tokens, stats):
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
        k = k.repeat_interleave(NH // NKV, dim=1)
        v = v.repeat_interleave(NH // NKV, dim=1)
        y = causal_attention(q, k, v).transpose(1, 2).reshape(Bn, Tn, NH * HS)
        x = x + y @ P[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, P[p + "post_attention_layernorm.weight"])
        moe = is_moe_layer(cfg, i)
        branch = torch.zeros_like(x)
        if not moe or cfg["moe_shared_expert"]:
            m = p + ("mlp.shared_expert." if moe else "mlp.")
            branch = branch + swiglu(h, P[m + "gate_proj.weight"], P[m + "up_proj.weight"], P[m + "down_proj.weight"])
        if moe:
            branch = branch + moe_block(cfg, P, p, h, stats)
        x = x + branch
    x = rms_norm(x, P["model.norm.weight"])
    return x @ P["lm_head.weight"].T


def run(cfg, init, tokens, targets, dtype):
    P = {n: t.to(dtype).clone().requires_grad_(True) for n, t in init.items()}
    stats = []
    logits = forward(cfg, P, tokens, stats)
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)
    loss = ce + sum(s["aux"] for s in stats)
    loss.backward()
    out = {"logits": logits.detach(), "loss": loss.detach().reshape(1), "ce": ce.detach().reshape(1)}
    out.update({"grad." + n: P[n].grad.detach().clone() for n in P})
    return out, stats


def make(name, out_root):
    cfg = CONFIGS[name]
    gen = torch.Generator().manual_seed(SEED + len(name))
    init = init_params(cfg, gen)
    V = cfg["vocab_size"]
    tokens = torch.randint(0, V, (B, T), generator=gen)
    targets = torch.randint(0, V, (B, T), generator=gen)
    targets[0, 3] = -1
    ref, stats = run(cfg, init, tokens, targets, torch.float64)
    single, stats32 = run(cfg, init, tokens, targets, torch.float32)
    assert [s["tokens"] for s in stats] == [s["tokens"] for s in stats32], "routing differs between f32 and f64"
    floor = {"logits": rel_err(single["logits"], ref["logits"]), "loss": rel_err(single["loss"], ref["loss"]),
             "grad_max": max(rel_err(single[k], ref[k]) for k in ref if k.startswith("grad."))}

    d = os.path.join(out_root, "parity_" + name)
    os.makedirs(d, exist_ok=True)
    meta = {"format": "pt", "tessera.name": "parity-" + name, "tessera.norm_eps": repr(EPS),
            "tessera.rope_theta": repr(ROPE_THETA)}
    for k in ("arch", "vocab_size", "max_seq_len", "n_layer", "n_head", "n_kv_head", "d_model", "d_ff",
              "moe_experts", "moe_top_k", "moe_every"):
        meta["tessera." + k] = str(cfg[k])
    for k in ("moe_capacity_factor", "moe_aux_loss", "moe_z_loss"):
        meta["tessera." + k] = repr(cfg[k])
    meta["tessera.tied_embeddings"] = "false"
    meta["tessera.moe_shared_expert"] = "true" if cfg["moe_shared_expert"] else "false"
    write_safetensors(os.path.join(d, "weights.safetensors"), {n: init[n].numpy() for n, _, _ in param_shapes(cfg)},
                      meta)
    expected = {"logits": f32(ref["logits"]), "loss": f32(ref["loss"]), "ce": f32(ref["ce"]),
                "tokens": tokens.to(torch.int32).numpy(), "targets": targets.to(torch.int32).numpy()}
    moe_layers = [i for i in range(cfg["n_layer"]) if is_moe_layer(cfg, i)]
    for i, s in zip(moe_layers, stats):
        expected["tokens_per_expert.%d" % i] = torch.tensor(s["tokens"], dtype=torch.int32).numpy()
        expected["dropped.%d" % i] = torch.tensor([s["dropped"]], dtype=torch.int32).numpy()
    for n, _, _ in param_shapes(cfg):
        expected["grad." + n] = f32(ref["grad." + n])
    write_safetensors(os.path.join(d, "expected.safetensors"), expected,
                      {"reference": "torch %s float64" % torch.__version__})
    config = dict(cfg)
    config.update({"norm_eps": EPS, "rope_theta": ROPE_THETA, "batch": B, "seq_len": T, "seed": SEED,
                   "loss": "cross-entropy (targets != -1) + sum over MoE layers of aux * lb + z * z-loss",
                   "dropped": {str(i): s["dropped"] for i, s in zip(moe_layers, stats)},
                   "reference_dtype": "float64", "float32_run_rel_err": floor})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    print(name, "loss %.6f" % ref["loss"].item(), "tokens", [s["tokens"] for s in stats], "dropped",
          [s["dropped"] for s in stats], "float32-vs-float64:", floor)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    for name in CONFIGS:
        make(name, os.path.normpath(args.out))


if __name__ == "__main__":
    main()
