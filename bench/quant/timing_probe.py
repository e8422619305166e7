"""How much of a graph replay's measured time is the replay's own start, not the calls in it?

bench_fp4.py timed a GEMM cell (until session 28) as (event b - event a) / R over one replay of R calls, with
R = the number of weight copies that exceed the L2 (9 at 4096x14336 NF4_DQ, 30 at 4096^2). Event a is
recorded on an idle stream, so it completes at once, and the interval then also holds the host's
submission of the replay and the first kernel's launch. This probe times the same cells four ways:

  A  as bench_fp4.py did: a.record(); replay; b.record()                    (per call: T / R)
  B  a spin kernel first, so the GPU is busy while the host submits a, the replay and b
  C  as B with a graph of 8 R calls (the same copies cycled 8 times)
  D  the difference of C and B: (T(8 R) - T(R)) / (7 R), which cancels every per-replay cost
     (bench_fp4.py's method since session 28)

and an empty replay (one tiny kernel) the A and B ways. If A - D is about (empty A) / R, the bias of
method A is the replay's start, a cost that a decode step graph of hundreds of kernels pays once.

Usage: PYTHONPATH=python python3 bench/quant/timing_probe.py
"""

import os
import statistics
import sys

import torch

import vstack.fp4 as fp4

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_fp4 import capture_graph as capture, fp4_copies, replay_time, weight_copies  # noqa: E402


def replay_seconds(g, spin, reps=9):
    """Median seconds of one replay of g between two events, with or without a spin kernel first."""
    return statistics.median(replay_time(g, spin) for _ in range(reps))


def four_ways(fns, inner):
    g1, g8 = capture(fns, inner), capture(fns, 8 * inner)
    ta, tb = replay_seconds(g1, False), replay_seconds(g1, True)
    tc = replay_seconds(g8, True)
    del g1, g8
    return {"A": ta / inner, "B": tb / inner, "C": tc / (8 * inner), "D": (tc - tb) / (7 * inner)}


def row(name, fns, inner):
    """Times fns the four ways and prints the cell's line."""
    r = four_ways(fns, inner)
    print(f"{name:32s} {inner:3d} | {r['A'] * 1e6:20.2f} {r['B'] * 1e6:6.2f} {r['C'] * 1e6:6.2f} "
          f"{r['D'] * 1e6:6.2f} | {r['A'] / r['D']:.3f} {(r['A'] - r['D']) * inner * 1e6:8.2f}", flush=True)


def main():
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    print(f"device: {props.name}, {props.multi_processor_count} SMs, L2 {props.L2_cache_size >> 20} MB", flush=True)
    tiny = torch.zeros(1, device="cuda")
    g = capture([lambda: tiny.add_(1)], 1)
    print(f"empty replay (one tiny kernel): A {replay_seconds(g, False) * 1e6:6.2f} us, "
          f"B {replay_seconds(g, True) * 1e6:6.2f} us", flush=True)
    del g
    cells = [(4096, 14336, 16, "nf4_dq"), (4096, 14336, 1, "nvfp4"), (8192, 8192, 16, "nvfp4"),
             (14336, 4096, 16, "nf4_dq"), (4096, 4096, 1, "nvfp4"), (4096, 4096, 16, "nf4_dq")]
    print(f"{'cell':32s} {'R':>3s} | us per call:  A (bench)      B      C      D | A/D   (A-D)*R us")
    for N, K, M, fmt in cells:
        w = torch.randn(N, K, dtype=torch.bfloat16, device="cuda") * 0.02
        x = torch.randn(M, K, dtype=torch.bfloat16, device="cuda")
        qs = fp4_copies(fp4.quantize(w, fmt))
        row(f"{fmt} {N}x{K} M={M}", [(lambda q=q: fp4.matmul(x, q)) for q in qs], max(len(qs), 8))
        del qs
        if M == 1:
            wts = weight_copies(w)
            row(f"torch bf16 {N}x{K} M={M}", [(lambda w=w: torch.matmul(x, w.t())) for w in wts], max(len(wts), 8))
            del wts
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
