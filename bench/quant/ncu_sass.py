#!/usr/bin/env python3
"""Where a kernel's warps spend their instructions and stall samples, by SASS opcode, from Nsight Compute's source
page (`ncu -i REPORT --page source --csv --print-source sass > NAME.csv`, of a report taken with the SourceCounters
section). Used on the wide decode kernel (docs/NOTES.md, session 41): warp instructions executed per unit of work
(e.g. per 16 x 64 tile-chunk: --per = N / 16 * K / 64), each opcode's share of the stall samples, the stall reasons,
and the instructions that gathered the most samples.

Usage: python3 bench/quant/ncu_sass.py NAME.csv [NAME.csv ...] [--per UNITS] [--top 10]
The opcode is the mnemonic without its predicate and modifiers (`@!P1 BRA` -> BRA, `HMMA.16816.F32.BF16` -> HMMA).
"""

import argparse
import collections
import csv
import re
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def load(path):
    """The source page's instruction rows (dicts by column name), and the stall-reason columns (all samples)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    try:
        at = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    except StopIteration:
        raise SystemExit(f"ncu_sass: {path}: no 'Address' header (not ncu's --page source --csv output)")
    hdr = rows[at]
    for col in ("Source", SAMPLES, EXECUTED):
        if col not in hdr:
            raise SystemExit(f"ncu_sass: {path}: no column '{col}' (take the report with --section SourceCounters)")
    reasons = [h for h in hdr if h.startswith("stall_") and "(Not Issued)" not in h]
    return [dict(zip(hdr, r)) for r in rows[at + 1:] if len(r) == len(hdr)], reasons


def opcode(src):
    s = re.sub(r"^@!?U?P[T0-9]+\s+", "", src.strip())
    return s.split()[0].split(".")[0] if s else "?"


def num(v):
    try:
        return int(float(v))
    except ValueError:  # ncu writes "-" or "" for none
        return 0


def summary(rows, reasons):
    """(instructions executed by opcode, samples by opcode, samples by reason): Counters."""
    ex, sm, rs = collections.Counter(), collections.Counter(), collections.Counter()
    for r in rows:
        op = opcode(r["Source"])
        ex[op] += num(r[EXECUTED])
        sm[op] += num(r[SAMPLES])
        for c in reasons:
            rs[c[len("stall_"):]] += num(r[c])
    return ex, sm, rs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--per", type=float, default=1.0, help="units of work: instructions are printed per unit")
    ap.add_argument("--top", type=int, default=10, help="instructions with the most samples to list")
    a = ap.parse_args(argv)
    for path in a.csv:
        rows, reasons = load(path)
        ex, sm, rs = summary(rows, reasons)
        n_ex, n_sm = sum(ex.values()), sum(sm.values())
        d_ex, d_sm = max(n_ex, 1), max(n_sm, 1)  # shares of an empty page print as 0
        print(f"== {path}: {n_ex / a.per:.1f} warp instructions per unit, {n_sm} stall samples")
        print("  opcode   per unit  % executed  % samples")
        for op, v in ex.most_common():
            if v / d_ex < 0.005 and sm[op] / d_sm < 0.005:
                continue
            print(f"  {op:8s} {v / a.per:8.1f}  {100 * v / d_ex:9.1f}  {100 * sm[op] / d_sm:8.1f}")
        print("  reasons: " + ", ".join(f"{k} {100 * v / d_sm:.1f} %" for k, v in rs.most_common() if v))
        for r in sorted(rows, key=lambda r: -num(r[SAMPLES]))[:a.top]:
            why = sorted(((num(r[c]), c[len("stall_"):]) for c in reasons), reverse=True)[:2]
            print(f"  {num(r[SAMPLES]):6d}  {r['Source'].strip()[:56]:56s} "
                  + " ".join(f"{k} {v}" for v, k in why if v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
