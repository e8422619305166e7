#!/usr/bin/env python3
"""Where a decode call's time goes by row-block width: from bench_fp4.py --json runs over several K of each N, fit
a call's time T = F + S t for each (N, format, M), with S = GX x ceil(K / 1024) the stages a CTA of the wide kernel
runs (GX = ceil(N / 16 / 132): the H200's 132 SMs) and the medians over the runs. t is the marginal time of a stage
and F the rest of a call (its start, x's first slice, the epilogue, the dependency chain). "loop %" is a stage's
bytes x the CTAs over t, as % of the read-only stream measured in the same runs (over 100 where the marginal stage
streams faster than that reference). A row lists each K's time and % of the stream.

Usage: python3 bench/quant/stage_fit.py RUN.json [RUN.json ...]
Used in session 54 (bench/RESULTS.md): shapes 4096, 6144, 8192 and 14336 x K for K = 4096, 8192, 14336.
"""

import json
import statistics
import sys
from collections import defaultdict

from compare import FORMATS  # bench/quant/compare.py, beside this file

SMS = 132


def load(paths):
    """({(N, K, M, fmt): (median us, median bytes a call)}, median read stream TB/s) over the runs."""
    cell = defaultdict(list)
    streams = []
    for path in paths:
        with open(path) as f:
            res = json.load(f)
        tb = res["read_TBps"]
        streams.append(tb)
        for row in res.get("gemm", []):
            for fmt in FORMATS:
                if fmt in row:
                    us, pct = row[fmt]["us"], row[fmt]["pct_read"]
                    cell[(row["N"], row["K"], row["M"], fmt)].append((us, pct / 100 * tb * 1e6 * us))
    if not streams:
        raise SystemExit("stage_fit: no runs")
    med = {key: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for key, v in cell.items()}
    return med, statistics.median(streams)


def stages(n, k):
    """(GX, CTAs, stages a CTA) of the wide kernel for an N x K weight on SMS SMs."""
    tiles = (n + 15) // 16
    gx = -(-tiles // SMS)
    return gx, -(-tiles // gx), gx * -(-k // 1024)


def fit(points):
    """Least squares (F, t) of T = F + S t over points (S, T)."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    t = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - t * mx, t


def main(paths):
    med, tb = load(paths)
    print(f"read stream {tb:.3f} TB/s (median of {len(paths)} runs)")
    groups = defaultdict(list)
    for (n, k, m, fmt), (us, nbytes) in med.items():
        gx, ctas, s = stages(n, k)
        groups[(n, gx, fmt, m)].append((k, s, us, nbytes, ctas))
    print(f"{'N':>6} {'GX':>2} {'fmt':>7} {'M':>3} | {'K: us (% of the stream)':<62} | {'F us':>6} {'t us':>6} {'loop %':>6}")
    for (n, gx, fmt, m), pts in sorted(groups.items()):
        pts.sort()
        desc = "  ".join(f"{k}: {us:6.2f} ({b / us / (tb * 1e6) * 100:4.1f})" for k, _, us, b, _ in pts)
        if len(pts) < 2:
            print(f"{n:>6} {gx:>2} {fmt:>7} {m:>3} | {desc}")
            continue
        f0, t = fit([(p[1], p[2]) for p in pts])
        stage_bytes = statistics.mean(p[3] / (p[4] * p[1]) for p in pts)
        loop = stage_bytes * pts[0][4] / t / (tb * 1e6) * 100
        print(f"{n:>6} {gx:>2} {fmt:>7} {m:>3} | {desc:<62} | {f0:6.2f} {t:6.3f} {loop:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
