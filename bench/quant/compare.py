#!/usr/bin/env python3
"""Compare variants of the FP4 GEMM benchmark: per cell the median time of each variant, its % of the
read-only stream, and the ratio of each variant's median to the reference's, with the range of the
per-run ratios (run i of a variant against run i of the reference, so a drift over the call shows).

Input: a folder of `bench_fp4.py --json` files (their GEMM cells, and their quantize / dequantize cells in a
second table) named <variant>_<run>.json (the variant is the name up to
the first underscore). Run the variants in alternation (A B A B ..., three or more rounds) in one device
call: two runs each proved unreliable (docs/NOTES.md, session 17).

Usage: python3 bench/quant/compare.py DIR [--order base,new,...]   (the first of --order is the reference)
"""

import argparse
import glob
import json
import math
import os
import statistics
import sys

FORMATS = ("nvfp4", "mxfp4", "nf4", "nf4_dq")


CONVERT_KINDS = ("quantize", "quantize_linear", "dequantize")


def load_parts(folder):
    """The folder's JSON files, read once, as {"gemm": {(N, K, M, fmt): {variant: {run: (us, pct_read)}}},
    "convert": {(kind, "fmt[/dtype]"): {variant: {run: (us, % of the copy)}}}}, kind one of CONVERT_KINDS
    (quantize: the GEMM layout)."""
    parts = {"gemm": {}, "convert": {}}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        name = os.path.basename(path)[: -len(".json")]
        variant, _, run = name.partition("_")
        with open(path) as f:
            res = json.load(f)
        for cname, c in res.get("convert", {}).items():
            for kind in CONVERT_KINDS:
                pct = 100 * c[kind + "_GBps"] / (res["copy_TBps"] * 1e3)
                parts["convert"].setdefault((kind, cname), {}).setdefault(variant, {})[run] = (c[kind + "_us"], pct)
        for row in res.get("gemm", []):
            for fmt in FORMATS:
                if fmt in row:
                    key = (row["N"], row["K"], row["M"], fmt)
                    cells = parts["gemm"].setdefault(key, {})
                    cells.setdefault(variant, {})[run] = (row[fmt]["us"], row[fmt]["pct_read"])
    return parts


def load(folder, part="gemm"):
    """One part of load_parts: "gemm" or "convert"."""
    return load_parts(folder)[part]


def compare(cells, order):
    """Rows (key, {variant: (median us, median %read)}, {variant: (ratio, lo, hi)}) and the geometric
    mean of each non-reference variant's ratios, over the cells the reference and it both have."""
    ref = order[0]
    rows, logs = [], {v: [] for v in order[1:]}
    for key in sorted(cells):
        c = cells[key]
        if ref not in c:
            continue
        med = {v: (statistics.median(u for u, _ in c[v].values()), statistics.median(p for _, p in c[v].values()))
               for v in order if v in c}
        ratios = {}
        for v in order[1:]:
            if v not in c:
                continue
            per_run = [c[v][r][0] / c[ref][r][0] for r in c[v] if r in c[ref]]
            ratio = med[v][0] / med[ref][0]
            ratios[v] = (ratio, min(per_run, default=ratio), max(per_run, default=ratio))
            logs[v].append(math.log(ratio))
        rows.append((key, med, ratios))
    geo = {v: (math.exp(sum(l) / len(l)), len(l)) for v, l in logs.items() if l}
    return rows, geo


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--order", default=None, help="variants, the reference first (default: all, sorted)")
    a = ap.parse_args(argv)
    parts = load_parts(a.dir)
    variants = sorted({v for cells in parts.values() for c in cells.values() for v in c})
    order = a.order.split(",") if a.order else variants
    if not variants or order[0] not in variants:
        print(f"compare: no runs of the reference '{order[0]}' in {a.dir} (variants: {variants})", file=sys.stderr)
        return 1
    ref = order[0]
    # a table per part present: the GEMM cells (% of the read stream), then quantize / dequantize (% of the copy)
    heads = {"gemm": f"{'shape':>11s} {'M':>4s} {'format':7s} ", "convert": f"{'kernel':15s} {'format':12s} "}
    for part, cells in parts.items():
        if not cells:
            continue
        rows, geo = compare(cells, order)
        pct = "%read" if part == "gemm" else "%copy"
        print(heads[part] + " ".join(f"{v + ' us':>10s} {pct:>6s}" for v in order) +
              "".join(f"  {v + ' / ' + ref:>20s}" for v in order[1:]))
        for key, med, ratios in rows:
            if part == "gemm":
                n, k, m, fmt = key
                line = f"{n:5d}x{k:<5d} {m:4d} {fmt:7s} "
            else:
                line = f"{key[0]:15s} {key[1]:12s} "
            line += " ".join(f"{med[v][0]:10.2f} {med[v][1]:6.1f}" if v in med else f"{'-':>10s} {'-':>6s}"
                             for v in order)
            for v in order[1:]:
                line += f"  {ratios[v][0]:7.3f} ({ratios[v][1]:.2f}-{ratios[v][2]:.2f})" if v in ratios else f"  {'-':>20s}"
            print(line)
        for v, (g, n) in geo.items():
            print(f"geometric mean {v} / {ref}: {g:.4f} over {n} {'cells' if part == 'gemm' else 'convert cells'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
