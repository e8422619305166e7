"""Decode GEMM calls with the weights hot in L2 against the bench's cold ones (session 51).

A call in a dependent chain cannot start its arithmetic before its x is there, so its time is at least the
chain (the dependency wait, x's round trip, y's store: `read_floor chain` / `trace`) plus its share of the
weights at the consumers' own rate. Hot: one weight copy reused by every call, so that the weights can come from L2
and HBM no longer sets the pace; a call's time is then that chain plus the consumers' time. Cold is bench_fp4.py's
method (copies cycled past L2).

The kernels load their weights evict_first, so a reused copy stays in L2 only where it is small (4096^2: ncu counts
no DRAM bytes); at the large shapes it still comes from DRAM. For a hot run there, use a build with
docs/labs/s51_keep_weights.patch (-Dcuda_args=-DVSTACK_LAB_KEEP_WEIGHTS=1: the weights evict_last), and check ncu's
DRAM throughput (docs/NOTES.md, session 51).

Usage: PYTHONPATH=python python3 bench/quant/l2_hot.py [--x-dtype bf16|f16] [--shapes ...] [--m 1,8,16]
"""

import argparse

import torch

import bench_fp4 as b
import vstack.fp4 as fp4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--formats", default="nvfp4,mxfp4,nf4,nf4_dq")
    ap.add_argument("--shapes", default="4096x4096,4096x14336,14336x4096,8192x8192")
    ap.add_argument("--m", default="1,8,16")
    ap.add_argument("--x-dtype", default="bf16", choices=["bf16", "f16"])
    a = ap.parse_args()
    dt = torch.bfloat16 if a.x_dtype == "bf16" else torch.float16
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    hbm_read, _ = b.read_bandwidth()
    print(f"device {torch.cuda.get_device_name(0)}, {sms} SMs; read stream {hbm_read / 1e12:.3f} TB/s; x {a.x_dtype}")
    print("shape        M  format  | cold us  % read | hot us  'x stream' | hot/cold | GB/s an SM hot")
    torch.manual_seed(0)
    for shape in a.shapes.split(","):
        n, k = (int(v) for v in shape.split("x"))
        w = torch.randn(n, k, device="cuda", dtype=dt)
        for fmt in a.formats.split(","):
            q = fp4.quantize(w, fmt)
            cold_q = b.fp4_copies(q)
            for m in (int(v) for v in a.m.split(",")):
                x = torch.randn(m, k, device="cuda", dtype=dt)
                # cold: the bench's own cell (its timing and bytes; its % of the copy stream is not used here)
                r = b.bench_gemm(fmt, m, n, k, cold_q, x, hbm_read, hbm_read)
                cold = r["us"] * 1e-6
                hot = b.graph_time([lambda: fp4.matmul(x, q)], reps=7, inner=32)
                print(f"{shape:>11} {m:2d}  {fmt:7s} | {r['us']:7.2f} {r['pct_read']:6.1f} % |"
                      f" {hot * 1e6:6.2f} {r['pct_read'] / 100 * cold / hot:7.2f}x | {hot / cold:8.3f} |"
                      f" {q.nbytes / hot / sms / 1e9:6.1f}")
            del cold_q
        del w


if __name__ == "__main__":
    main()
