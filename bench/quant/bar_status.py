#!/usr/bin/env python3
"""Where issue 3's decode bar stands, from bench_fp4.py --json runs of one library: every decode cell (M <= 16)
on the bar's shapes as % of the read-only stream measured in the same run (the median over the runs given), a *
where a cell reads under the bar, and torch bf16 / vstack at M = 1 (the bar's "3x torch" form).

The bar (issue 3): the fused x * W^T at M <= 16 reads the weights and scales at >= 75 % of the measured HBM
bandwidth on N = K = 8192 and 4096x4096, 14336x4096, 4096x14336, i.e. >= 3x torch's bf16 matmul at M = 1. The
read-only stream is the reference for a kernel that reads and writes almost nothing (bench_fp4.py's docstring).

Usage: python3 bench/quant/bar_status.py RUN.json [RUN.json ...] [--bar 75] [--speedup 3]
Prints the table and a closing line "decode bar: N of T cells at >= 75 %, ..."; exit status 0 (a report).
"""

import argparse
import json
import statistics
import sys

from bar import SHAPES as BAR_SHAPES  # bench/quant/bar.py and compare.py, beside this file
from compare import FORMATS


def cells(paths):
    """{(N, K, M): {fmt: [pct_read per run], "torch_us": [...], fmt + "_us": [...]}} over the decode rows of the
    runs, and the runs' read-stream figures (TB/s)."""
    out, streams = {}, []
    for path in paths:
        with open(path) as f:
            res = json.load(f)
        streams.append(res["read_TBps"])
        for row in res.get("gemm", []):
            if row["M"] > 16:
                continue
            c = out.setdefault((row["N"], row["K"], row["M"]), {})
            if "torch_bf16" in row:
                c.setdefault("torch_us", []).append(row["torch_bf16"]["us"])
            for fmt in FORMATS:
                if fmt in row:
                    c.setdefault(fmt, []).append(row[fmt]["pct_read"])
                    c.setdefault(fmt + "_us", []).append(row[fmt]["us"])
    return out, streams


def status(table, bar, speedup):
    """Rows (N, K, M, [(fmt, pct or None, under)], [torch / vstack at M = 1 per format or None]) for the bar's
    shapes, and the counts (met, total, unmet keys, M = 1 speedups under `speedup`)."""
    rows, met, total, unmet, slow = [], 0, 0, [], []
    for n, k in BAR_SHAPES:
        for m in sorted(mm for (nn, kk, mm) in table if (nn, kk) == (n, k)):
            c = table[(n, k, m)]
            vals, xs = [], []
            for fmt in FORMATS:
                if fmt not in c:
                    vals.append((fmt, None, False))
                    xs.append(None)
                    continue
                p = statistics.median(c[fmt])
                under = p < bar
                vals.append((fmt, p, under))
                total += 1
                met += not under
                if under:
                    unmet.append((n, k, m, fmt, p))
                if m == 1 and "torch_us" in c:
                    x = statistics.median(c["torch_us"]) / statistics.median(c[fmt + "_us"])
                    xs.append(x)
                    if x < speedup:
                        slow.append((n, k, fmt, x))
                else:
                    xs.append(None)
            rows.append((n, k, m, vals, xs))
    return rows, (met, total, unmet, slow)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--bar", type=float, default=75.0, help="%% of the read stream (default 75)")
    ap.add_argument("--speedup", type=float, default=3.0, help="torch / vstack at M = 1 (default 3)")
    a = ap.parse_args(argv)
    table, streams = cells(a.runs)
    rows, (met, total, unmet, slow) = status(table, a.bar, a.speedup)
    print(f"read-only stream {min(streams):.3f}-{max(streams):.3f} TB/s over {len(streams)} run(s); "
          f"% of it, median over the runs (* under {a.bar:g}); torch bf16 / vstack at M = 1")
    print(f"{'shape':>11s} {'M':>3s} " + " ".join(f"{fmt:>8s}" for fmt in FORMATS))
    for n, k, m, vals, xs in rows:
        line = f"{n:5d}x{k:<5d} {m:3d} " + " ".join(
            f"{'-':>8s}" if p is None else f"{p:7.1f}{'*' if under else ' '}" for _, p, under in vals)
        if any(x is not None for x in xs):
            line += "   x " + " ".join("-" if x is None else f"{x:.2f}" for x in xs)
        print(line)
    print(f"decode bar: {met} of {total} cells at >= {a.bar:g} %, {len(slow)} M = 1 cells under {a.speedup:g}x torch")
    if unmet:
        worst = min(unmet, key=lambda u: u[4])
        print(f"  lowest: {worst[0]}x{worst[1]} M = {worst[2]} {worst[3]} {worst[4]:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
