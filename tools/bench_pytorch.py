#!/usr/bin/env python3
"""PyTorch CPU reference for bench/run_model_bench.sh: one GPT-2-style training step
(forward + backward + AdamW) on the same model, batch, thread count and optimizer as
bench_train_step. Run with Debian's /usr/bin/python3 (python3-torch) or a newer torch in a
benchmark-only virtual environment; a tool, never a build or run-time dependency. Prints one JSON line.
--attention sdpa (F.scaled_dot_product_attention) and --compile (torch.compile) need torch >= 2.0.
--autocast bf16 runs the forward under torch.autocast (CPU: matmuls in bf16, master weights and
AdamW in f32), PyTorch's own mixed precision, the reference for bench_train_step --precision bf16.
--device cuda runs it on the GPU (fp32, TF32 off as PyTorch's default for matmuls), the reference for
bench_train_step --device cuda (tools/gpu_check.sh)."""
import argparse, contextlib, json, math, os, resource, sys, time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {  # name: (V, maxT, L, NH, C)
    "gpt2": (50257, 1024, 12, 12, 768),
    "gpt2-medium": (50257, 1024, 24, 16, 1024),
    "bench-small": (8192, 512, 6, 6, 384),
    "bench-tiny": (256, 256, 4, 4, 256),
    "tiny": (256, 64, 2, 4, 64),
}


class Block(nn.Module):
    def __init__(self, C, NH, sdpa=False):
        super().__init__()
        self.NH, self.sdpa = NH, sdpa
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x, mask):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        if self.sdpa:  # fused kernel, same causal mask and 1/sqrt(head size) scale
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.NH))
            att = att.masked_fill(mask[:, :, :T, :T] == 0, float("-inf")).softmax(dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, maxT, L, NH, C, sdpa=False):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(maxT, C)
        self.h = nn.ModuleList(Block(C, NH, sdpa) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.register_buffer("mask", torch.tril(torch.ones(maxT, maxT)).view(1, 1, maxT, maxT))

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for blk in self.h:
            x = blk(x, self.mask)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied head
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bench-tiny")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--attention", choices=["manual", "sdpa"], default="manual")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (not the optimizer)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--autocast", choices=["none", "bf16"], default="none",
                    help="bf16: the forward (and so the backward's matmuls) under torch.autocast")
    ap.add_argument("--warmup", type=int, default=None, help="untimed first steps (default 1, 3 with --compile)")
    a = ap.parse_args()
    if a.attention == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
        ap.error(f"--attention sdpa needs F.scaled_dot_product_attention (torch >= 2.0), not {torch.__version__}")
    if a.compile and not hasattr(torch, "compile"):
        ap.error(f"--compile needs torch.compile (torch >= 2.0), not torch {torch.__version__}")
    warmup = max(1, a.warmup if a.warmup is not None else (3 if a.compile else 1))  # compiles in the first
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    V, maxT, L, NH, C = PRESETS[a.model]
    maxT = max(maxT, a.seq)
    model = GPT(V, maxT, L, NH, C, sdpa=a.attention == "sdpa").to(a.device)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and not n.startswith("w")]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() == 2 and not n.startswith("w"))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    idx = torch.randint(0, V, (a.batch, a.seq), device=a.device)
    tgt = torch.randint(0, V, (a.batch, a.seq), device=a.device)
    fwd = torch.compile(model) if a.compile else model  # same parameters; compiles on the first warm-up step

    autocast = (lambda: torch.autocast(device_type=a.device, dtype=torch.bfloat16)) if a.autocast == "bf16" \
        else contextlib.nullcontext

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = fwd(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    for _ in range(warmup):
        step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    t = times[len(times) // 2]
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"impl": "pytorch", "device": a.device, "torch": torch.__version__, "model": a.model, "B": a.batch, "T": a.seq,
                      "threads": a.threads, "step_s": t, "tokens_per_s": a.batch * a.seq / t,
                      "peak_rss_mb": rss_mb, "blas": torch.__config__.show().count("OpenBLAS") > 0,
                      "torch_version": torch.__version__, "attention": a.attention, "compiled": a.compile,
                      "precision": "bf16" if a.autocast == "bf16" else "fp32",
                      # bench/run_model_bench.sh caps PyTorch's kernels (ATen, MKL, oneDNN, OpenBLAS) at AVX2
                      # for the forced-avx2 comparison; ATen's own report shows the cap took effect.
                      "cpu_cap": os.environ.get("TESSERA_BENCH_CPU_CAP", "native"),
                      "aten_cpu_capability": aten_cpu_capability()}))


def aten_cpu_capability():
    get = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    return get() if get else "unknown (torch " + torch.__version__ + ")"


if __name__ == "__main__":
    sys.exit(main())
