#!/usr/bin/env python3
"""PyTorch CPU reference for bench/run_model_bench.sh: one GPT-2-style training step
(forward + backward + AdamW) on the same model, batch, thread count and optimizer as
bench_train_step. Run with Debian's /usr/bin/python3 (python3-torch); a tool, never a run-time
dependency. Prints one JSON line."""
import argparse, json, math, resource, sys, time

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
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x, mask):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.NH))
        att = att.masked_fill(mask[:, :, :T, :T] == 0, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, maxT, L, NH, C):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(maxT, C)
        self.h = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.register_buffer("mask", torch.tril(torch.ones(maxT, maxT)).view(1, 1, maxT, maxT))

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
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
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    V, maxT, L, NH, C = PRESETS[a.model]
    maxT = max(maxT, a.seq)
    model = GPT(V, maxT, L, NH, C)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and not n.startswith("w")]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() == 2 and not n.startswith("w"))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    idx = torch.randint(0, V, (a.batch, a.seq))
    tgt = torch.randint(0, V, (a.batch, a.seq))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    t = times[len(times) // 2]
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"impl": "pytorch", "torch": torch.__version__, "model": a.model, "B": a.batch, "T": a.seq,
                      "threads": a.threads, "step_s": t, "tokens_per_s": a.batch * a.seq / t,
                      "peak_rss_mb": rss_mb, "blas": torch.__config__.show().count("OpenBLAS") > 0}))


if __name__ == "__main__":
    sys.exit(main())
