#!/usr/bin/env python3
"""Decode-regime matmul digests: y = vstack.fp4.matmul(x, q) over the wide kernel's row-block widths (GX 2..7),
every format, bf16 and f16 x, M = 1..16, from seeded inputs, each checked against an fp32 product of x with the
dequantized weights and recorded by its SHA-256.

A kernel change that must not move any arithmetic (a reordered prologue, a different ring walk) is checked by
running this once per library and comparing: every y must be bit-identical. The reference check catches a wrong
kernel on its own (relative error over 2^-6, or a non-finite y). The bound is loose on purpose: the kernel's own
error is the rounding of y to x's dtype (and, for NF4, of the table values), at most 0.0032 over the C++ suite's
matmul cases, while a wrong tile, chunk or scale gives errors of order 1. Before each call the block y will most likely
get from torch's caching allocator is filled with NaN (a tensor of y's size, freed just before), so an unwritten
element shows as NaN; the C++ suite (test_fp4_gpu.cpp) poisons its outputs for certain.

Usage: VSTACK_KERNELS_LIB=lib.so PYTHONPATH=python python3 tests/gpu/quant/matmul_digest.py --out a.json
       VSTACK_KERNELS_LIB=lab.so PYTHONPATH=python python3 tests/gpu/quant/matmul_digest.py --compare a.json
Prints one line per mismatch and a closing "N passed, N failed" line; exit status 0 only if all passed.
"""

import argparse
import hashlib
import json
import sys
import zlib

import torch

import vstack.fp4 as fp4

# N x K: the wide instances' GX = ceil(N / 16 / SMs) on a 132-SM part (4096: 2, 6144: 3, 8192: 4, 10240: 5,
# 12288: 6, 14336: 7), with a ragged N and the bench's large-K shape
SHAPES = [(4096, 4096), (4096, 14336), (6144, 4096), (8192, 8192), (10240, 8192), (12288, 4096), (14336, 4096),
          (10585, 2112)]
MS = [1, 2, 3, 4, 5, 8, 9, 12, 16]
FORMATS = list(fp4.FORMATS)  # nvfp4, mxfp4, nf4, nf4_dq
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}


def cells(quick):
    shapes = SHAPES[:3] if quick else SHAPES
    for n, k in shapes:
        for fmt in FORMATS:
            for dt in DTYPES:
                for m in MS:
                    yield n, k, fmt, dt, m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="write the digests here")
    ap.add_argument("--compare", help="digests of a reference library: every y must match")
    ap.add_argument("--quick", action="store_true", help="the first three shapes only")
    args = ap.parse_args()
    ref = json.load(open(args.compare)) if args.compare else None
    dev = torch.device("cuda")
    digests, passed, failed = {}, 0, 0
    wkey = None  # the weight of the current (n, k, fmt, dt): cells() walks M innermost
    for n, k, fmt, dt, m in cells(args.quick):
        key = f"{fmt} {dt} {n}x{k} M={m}"
        if wkey != (n, k, fmt, dt):
            wkey = (n, k, fmt, dt)
            g = torch.Generator(device=dev).manual_seed(zlib.crc32(f"{n} {k} {fmt} {dt}".encode()))
            w = torch.randn(n, k, device=dev, generator=g, dtype=torch.float32).to(DTYPES[dt])
            q = fp4.quantize(w, fmt)
            wd = q.dequantize(torch.float32)
        g = torch.Generator(device=dev).manual_seed((n * 131 + k * 7 + m) & 0xFFFFFFFF)
        x = torch.randn(m, k, device=dev, generator=g, dtype=torch.float32).to(DTYPES[dt])
        poison = torch.full((m, n), float("nan"), device=dev, dtype=DTYPES[dt])
        del poison
        y = fp4.matmul(x, q)
        torch.cuda.synchronize()
        yr = x.float() @ wd.T
        rel = ((y.float() - yr).norm() / yr.norm()).item()
        ok = bool(torch.isfinite(y).all()) and rel < 2 ** -6
        h = hashlib.sha256(y.cpu().view(torch.int16).numpy().tobytes()).hexdigest()
        digests[key] = h
        if ok and ref is not None and ref.get(key) != h:
            print(f"MISMATCH {key}: not bit-identical to the reference library")
            ok = False
        elif not ok:
            print(f"FAIL {key}: rel err {rel:.3e} (bound 2^-6), finite {bool(torch.isfinite(y).all())}")
        passed += ok
        failed += not ok
    if args.out:
        json.dump(digests, open(args.out, "w"), indent=0)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
