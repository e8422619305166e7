#!/usr/bin/env python3
"""Benchmark of vstack.attn against torch SDPA (flash and cuDNN backends), measured in the same run.

bf16, batch x seqlen = 16k tokens, hidden 2048 (heads = 2048 / head_dim), head_dim 64/128/256,
causal and not, seqlen 512 ... 16k; forward and forward+backward. TFLOPS as flash-attention counts
them: forward 4 * B * H * Sq * Sk * D (halved for causal), backward 2.5x the forward, fwd+bwd 3.5x.
Median of --reps timed runs (CUDA events) after warm-up. Also: decode (Sq = 1, split over keys)
and peak memory at 16k against the math backend.
Usage: VSTACK_KERNELS_LIB=... python3 bench/attn/bench_attn.py [--quick] [--out FILE.md]
"""
import argparse
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import vstack.attn as va  # noqa: E402


def timed(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)  # ms


def impls():
    def ours(q, k, v, causal):
        return va.flash_attention(q, k, v, causal=causal)

    def backend(b):
        def f(q, k, v, causal):
            with sdpa_kernel(b):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return f

    return {"vstack": ours, "sdpa-flash": backend(SDPBackend.FLASH_ATTENTION),
            "sdpa-cudnn": backend(SDPBackend.CUDNN_ATTENTION)}


def bench_grid(args, out):
    seqlens = [512, 1024, 2048, 4096, 8192, 16384]
    hds = [64, 128, 256]
    if args.quick:
        seqlens, hds = [1024, 4096, 16384], [64, 128, 256]
    if args.hd:
        hds = [int(x) for x in args.hd.split(",")]
    if args.seqlens:
        seqlens = [int(x) for x in args.seqlens.split(",")]
    causals = [c == "yes" for c in args.causal.split(",")]
    fns = {k: f for k, f in impls().items() if k in args.impls.split(",")}
    rows = []
    for hd in hds:
        for causal in causals:
            for s in seqlens:
                b, h = 16384 // s, 2048 // hd
                q, k, v = (torch.randn(b, h, s, hd, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                           for _ in range(3))
                do = torch.randn_like(q)
                flops = 4 * b * h * s * s * hd / (2 if causal else 1)
                res = {}
                for name, f in fns.items():
                    try:
                        tf = timed(lambda: f(q, k, v, causal), args.reps)

                        def fb():
                            q.grad = k.grad = v.grad = None
                            f(q, k, v, causal).backward(do)
                        tfb = timed(fb, args.reps)
                        res[name] = (flops / tf / 1e9, 3.5 * flops / tfb / 1e9, 2.5 * flops / max(tfb - tf, 1e-9) / 1e9)
                    except Exception as e:  # a backend that does not take this shape
                        res[name] = None
                        print(f"  {name} hd{hd} s{s}: {type(e).__name__}: {str(e)[:100]}", file=sys.stderr)
                rows.append((hd, causal, s, res))
                print(fmt_row(hd, causal, s, res), flush=True)
    out.append("| hd | causal | seqlen | vstack fwd | flash fwd | cuDNN fwd | vstack bwd | flash bwd | cuDNN bwd "
               "| vstack fwd+bwd | flash fwd+bwd | cuDNN fwd+bwd | fwd ×flash | fwd ×cuDNN | f+b ×flash | f+b ×cuDNN |")
    out.append("|" + "---|" * 16)
    for hd, causal, s, res in rows:
        out.append(fmt_row(hd, causal, s, res))


def fmt_row(hd, causal, s, res):
    def v(name, i):
        return f"{res[name][i]:.0f}" if res.get(name) else "n/a"

    def r(name, i):
        return f"{res['vstack'][i] / res[name][i]:.2f}" if res.get(name) and res.get("vstack") else "n/a"

    return (f"| {hd} | {'yes' if causal else 'no'} | {s} | {v('vstack', 0)} | {v('sdpa-flash', 0)} | {v('sdpa-cudnn', 0)} "
            f"| {v('vstack', 2)} | {v('sdpa-flash', 2)} | {v('sdpa-cudnn', 2)} | {v('vstack', 1)} | {v('sdpa-flash', 1)} "
            f"| {v('sdpa-cudnn', 1)} | {r('sdpa-flash', 0)} | {r('sdpa-cudnn', 0)} | {r('sdpa-flash', 1)} | {r('sdpa-cudnn', 1)} |")


def bench_decode(args, out):
    out.append("")
    out.append("Decode (Sq = 1, B = 1, Hq = 32, Hkv = 8, hd 128, bf16): time and K+V read bandwidth.")
    out.append("")
    out.append("| Sk | vstack µs | vstack GB/s | vstack in a CUDA graph µs | graph GB/s | vstack no split µs "
               "| sdpa-flash µs | sdpa-cudnn µs |")
    out.append("|---|---|---|---|---|---|---|---|")
    for sk in (4096, 16384, 65536, 131072):
        q = torch.randn(1, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(1, 8, sk, 128, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        t = timed(lambda: va.flash_attention(q, k, v), args.reps * 4)
        t1 = timed(lambda: va.flash_attention_with_lse(q, k, v, num_splits=1), args.reps * 4)
        kr, vr = k.repeat_interleave(4, 1), v.repeat_interleave(4, 1)  # SDPA flash/cuDNN: same heads
        other = []
        for b in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
            try:
                with sdpa_kernel(b):
                    other.append(f"{timed(lambda: F.scaled_dot_product_attention(q, kr, vr), args.reps * 4) * 1e3:.1f}")
            except Exception:
                other.append("n/a")
        gbs = 2 * k.numel() * 2 / (t * 1e-3) / 1e9
        try:  # the kernels alone, without the Python and dispatch overhead of one eager call
            va.flash_attention(q, k, v)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(20):
                    va.flash_attention(q, k, v)
            tg = timed(graph.replay, args.reps) / 20
            graph_txt = f"{tg * 1e3:.1f} | {2 * k.numel() * 2 / (tg * 1e-3) / 1e9:.0f}"
        except Exception as e:
            graph_txt = "n/a | n/a"
            print(f"  graph capture: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
        line = f"| {sk} | {t * 1e3:.1f} | {gbs:.0f} | {graph_txt} | {t1 * 1e3:.1f} | {other[0]} | {other[1]} |"
        out.append(line)
        print(line, flush=True)


def bench_memory(out):
    out.append("")
    out.append("Peak memory (torch.cuda.max_memory_allocated above the inputs), B = 1, H = 8, S = 16384, hd 128, "
               "bf16, fwd + bwd:")
    out.append("")
    out.append("| implementation | peak extra MiB |")
    out.append("|---|---|")
    for name in ("vstack", "sdpa-math"):
        torch.cuda.empty_cache()
        q, k, v = (torch.randn(1, 8, 16384, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        do = torch.randn_like(q)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        try:
            if name == "vstack":
                va.flash_attention(q, k, v).backward(do)
            else:
                with sdpa_kernel(SDPBackend.MATH):
                    F.scaled_dot_product_attention(q, k, v).backward(do)
            torch.cuda.synchronize()
            peak = (torch.cuda.max_memory_allocated() - base) / 2**20
            line = f"| {name} | {peak:.0f} |"
        except torch.OutOfMemoryError:
            line = f"| {name} | out of memory |"
        out.append(line)
        print(line, flush=True)
        del q, k, v, do


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default="grid,decode,memory")
    ap.add_argument("--hd", default="", help="head dims of the grid, e.g. 128 (default: 64,128,256)")
    ap.add_argument("--seqlens", default="", help="seqlens of the grid, e.g. 4096,16384 (default: 512...16384)")
    ap.add_argument("--causal", default="no,yes", help="causal settings of the grid: no,yes / no / yes")
    ap.add_argument("--impls", default="vstack,sdpa-flash,sdpa-cudnn")
    args = ap.parse_args()
    out = [f"Device: {torch.cuda.get_device_name()}, torch {torch.__version__}; TFLOPS, median of {args.reps}.", ""]
    parts = args.only.split(",")
    if "grid" in parts:
        bench_grid(args, out)
    if "decode" in parts:
        bench_decode(args, out)
    if "memory" in parts:
        bench_memory(out)
    text = "\n".join(out) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
