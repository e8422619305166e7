#!/usr/bin/env python3
"""A program for Nsight Compute to profile: eight calls of vstack.fp4.matmul, one format and M, on a random N x K
weight (x bf16). Profile one of the later calls, e.g. (docs/NOTES.md, session 41):

  ncu --clock-control none -k regex:fp4_gemv_wide --launch-skip 4 --launch-count 1 --section WarpStateStats \\
      --section SchedulerStats --section SourceCounters -o REPORT python3 bench/quant/ncu_matmul.py nvfp4 16 8192 8192
  ncu -i REPORT.ncu-rep --page source --csv --print-source sass > REPORT.csv   # then bench/quant/ncu_sass.py

Usage: PYTHONPATH=python python3 bench/quant/ncu_matmul.py FORMAT M N K
"""

import sys

import torch

from vstack import fp4


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    fmt, m, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.manual_seed(0)
    q = fp4.quantize(torch.randn(n, k, device="cuda", dtype=torch.bfloat16), fmt)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    for _ in range(8):
        y = fp4.matmul(x, q)
    torch.cuda.synchronize()
    print(fmt, m, n, k, float(y.float().abs().sum()))


if __name__ == "__main__":
    main()
