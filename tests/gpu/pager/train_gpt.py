#!/usr/bin/env python3
"""An ordinary PyTorch training script (tests (c), (d) and the step-time bench).

A GPT-style decoder (~300M parameters by default), AdamW, bf16 autocast, fixed
seeds, deterministic algorithms, synthetic token data. It knows nothing of
vstack: the same file runs natively and under `vstack-run`, and the two loss
sequences are compared.

Prints one line per step:  step <i> loss <repr(float)> time_ms <ms>
and at the end the peak memory PyTorch reserved/allocated. Writes a JSON file
(--out) with the losses, step times and peaks.

Modes: eager (default), --compile (torch.compile), --cuda-graphs (the whole
step -- forward, backward, optimizer -- captured once into a CUDAGraph and
replayed).
"""
import argparse
import json
import math
import os
import signal
import sys
import time

# Must be set before cuBLAS initialises for deterministic GEMMs.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch
import torch.nn as nn
import torch.nn.functional as F


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--d-model", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--vocab", type=int, default=32768)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--cuda-graphs", action="store_true", help="capture the whole step into a CUDAGraph")
    p.add_argument("--warmup", type=int, default=3,
                   help="eager steps (on a side stream) before capture with --cuda-graphs")
    p.add_argument("--out", default=None, help="write losses and timings to this JSON file")
    p.add_argument("--signal-at-step", type=int, default=-1,
                   help="after this step, and again after the last one, send --signal to this process (used by "
                        "the bench to take stats snapshots) and sleep --signal-sleep seconds; not counted in "
                        "step times")
    p.add_argument("--signal", default="SIGUSR1")
    p.add_argument("--signal-sleep", type=float, default=1.0)
    a = p.parse_args(argv)
    if a.compile and a.cuda_graphs:
        p.error("--compile and --cuda-graphs are separate modes")
    if a.d_model % a.heads:
        p.error("--d-model must be a multiple of --heads")
    return a


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        x = x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, vocab, seq, d, heads, layers):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied
        for name, prm in self.named_parameters():
            if prm.dim() >= 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "out.weight")) else 0.02
                nn.init.normal_(prm, mean=0.0, std=std)
            elif name.endswith("bias"):
                nn.init.zeros_(prm)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


def synthetic_tokens(steps, batch, seq, vocab, seed):
    """Learnable synthetic text: x[t+1] = (31*x[t] + 7 + noise) mod vocab, noise in 0..3."""
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.empty(steps, batch, seq + 1, dtype=torch.int64)
    x[:, :, 0] = torch.randint(0, vocab, (steps, batch), generator=g)
    noise = torch.randint(0, 4, (steps, batch, seq), generator=g)
    for t in range(seq):
        x[:, :, t + 1] = (x[:, :, t] * 31 + 7 + noise[:, :, t]) % vocab
    return x


def main(argv=None):
    a = parse_args(argv)
    print(f"pid {os.getpid()}", flush=True)
    torch.manual_seed(a.seed)
    torch.cuda.manual_seed_all(a.seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if a.compile:
        import torch._inductor.config as icfg
        if hasattr(icfg, "deterministic"):
            icfg.deterministic = True  # no on-device benchmarking that could pick other kernels
    dev = torch.device("cuda")

    model = GPT(a.vocab, a.seq, a.d_model, a.heads, a.layers)  # initialised on the CPU: same weights anywhere
    nparams = sum(p.numel() for p in model.parameters())
    model = model.to(dev)
    data = synthetic_tokens(a.steps, a.batch, a.seq, a.vocab, a.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1,
                            capturable=a.cuda_graphs)
    fwd = torch.compile(model) if a.compile else model
    mode = "compile" if a.compile else ("cuda-graphs" if a.cuda_graphs else "eager")
    print(f"model {nparams / 1e6:.1f}M parameters, {a.layers} layers, d_model {a.d_model}, batch {a.batch}x{a.seq}, "
          f"mode {mode}, torch {torch.__version__}, device {torch.cuda.get_device_name(0)}", flush=True)

    # Autocast's weight cache must be off inside graph capture.
    def autocast():
        return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=not a.cuda_graphs)

    def step_fn(x, y):
        with autocast():
            loss = fwd(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=not a.cuda_graphs)
        # Detached: nothing outside the step keeps its autograd graph (and the
        # AccumulateGrad nodes' streams) alive into the next step or the capture.
        return loss.detach()

    static_x = torch.zeros(a.batch, a.seq, dtype=torch.int64, device=dev)
    static_y = torch.zeros(a.batch, a.seq, dtype=torch.int64, device=dev)
    graph = None
    static_loss = None
    losses, times = [], []
    signal_num = getattr(signal, a.signal) if a.signal_at_step >= 0 else None
    side = torch.cuda.Stream() if a.cuda_graphs else None  # warm-up stream before capture

    for i in range(a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if not a.cuda_graphs:
            loss = step_fn(data[i, :, :-1].to(dev, non_blocking=False), data[i, :, 1:].to(dev, non_blocking=False))
            val = loss.item()
        else:
            static_x.copy_(data[i, :, :-1])
            static_y.copy_(data[i, :, 1:])
            if i < a.warmup:
                # Warm-up steps on a side stream, as capture requires.
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    loss = step_fn(static_x, static_y)
                torch.cuda.current_stream().wait_stream(side)
                val = loss.item()
            else:
                if graph is None:
                    graph = torch.cuda.CUDAGraph()
                    # The capture runs the step once on its inputs but does
                    # not execute it: replay right after.
                    with torch.cuda.graph(graph):
                        static_loss = step_fn(static_x, static_y)
                graph.replay()
                val = static_loss.item()
        torch.cuda.synchronize()
        dt = (time.perf_counter() - t0) * 1e3
        losses.append(val)
        times.append(dt)
        print(f"step {i} loss {val!r} time_ms {dt:.3f}", flush=True)
        if i == a.signal_at_step:
            print(f"signal {a.signal} at {time.time()!r}", flush=True)  # wall clock before the signal
            os.kill(os.getpid(), signal_num)
            time.sleep(a.signal_sleep)

    if a.signal_at_step >= 0:
        # A second dump after the last step: the stats at the end of the run do
        # not depend on the exit-time dump.
        os.kill(os.getpid(), signal_num)
        time.sleep(a.signal_sleep)
    reserved = torch.cuda.max_memory_reserved()
    allocated = torch.cuda.max_memory_allocated()
    steady = sorted(times[min(len(times) - 1, a.warmup + 2 if a.cuda_graphs else 3):])
    median = steady[len(steady) // 2] if steady else float("nan")
    print(f"max_memory_reserved {reserved}", flush=True)
    print(f"max_memory_allocated {allocated}", flush=True)
    print(f"median_step_ms {median:.3f}", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"mode": mode, "args": vars(a), "params": nparams, "losses": losses, "step_ms": times,
                       "median_step_ms": median, "max_memory_reserved": reserved,
                       "max_memory_allocated": allocated, "pid": os.getpid(),
                       "torch": torch.__version__, "device": torch.cuda.get_device_name(0)}, f, indent=1)
    if not all(math.isfinite(v) for v in losses):
        print("non-finite loss", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
