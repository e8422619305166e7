"""FP4 benchmarks: quantize/dequantize GB/s and the dequant-GEMM against torch bf16 (cuBLAS), same run
(or f16: --x-dtype f16, x, y and torch's matmul in f16).

Usage: PYTHONPATH=python python3 bench/quant/bench_fp4.py [--quick] [--json OUT.json]
       [--formats nvfp4,...] [--shapes 8192x8192,...] [--m 1024,4096] [--no-convert] [--no-gemm]
       [--convert-dtypes bf16,f16,f32] [--x-dtype bf16|f16]

Method (see .library METHOD.md): calls are captured in CUDA graphs of R and 8R
calls that cycle over enough weight copies to exceed the L2 cache, so weights
stream from HBM as in a real decode step. Each replay is timed by events with a
spin kernel in front (the GPU is busy while the host submits the events and the
replay), and the time per call is the difference of the two graphs' median
replay times over the 7R calls between them: the steady-state cost of one call
among many, without the replay's own start. Until session 28 a call's time was
one replay of R calls on an idle stream over R: that also counted the host's
submission of the replay and its first launch, 4-11 us per replay (H200,
bench/quant/timing_probe.py), 3-11 % of a decode call at R = 8-32.

Two HBM references, both measured in the same run: a device-to-device copy
(torch copy_, 1 GiB, bytes read + written) and a read-only stream (a Triton
kernel reading 1 GiB with 16-byte loads; torch.amax if Triton is missing).
The bars use the figure of the same access mix: the GEMM (reads weights,
writes almost nothing) against the read-only stream, quantize/dequantize
(read one tensor, write another) against the copy. Both %s are printed.
"bytes" of a GEMM = weight codes + scales + x + y.

To compare libraries or settings, run this with --json <variant>_<run>.json for each variant in
alternation, then bench/quant/compare.py on the folder (medians, ratios, per-run ranges).
"""

import argparse
import json
import statistics
import sys

import torch

import bar  # bench/quant/bar.py, beside this file
import vstack.fp4 as fp4

L2_FLUSH_BYTES = 256 << 20  # rotate over at least this many weight bytes (L2: H100 50 MB, H200 60 MB)


def l2_copies(nbytes):
    """How many copies of nbytes to cycle over so that they exceed L2_FLUSH_BYTES (at least 2)."""
    return max(2, -(-L2_FLUSH_BYTES // nbytes))


def weight_copies(w):
    """Copies of the dense weight w to cycle over (l2_copies)."""
    return [w.clone() for _ in range(l2_copies(w.numel() * w.element_size()))]


def fp4_copies(q):
    """Copies of the FP4 weight q to cycle over (l2_copies)."""
    return [fp4.FP4Tensor(q.codes.clone(), q.scales.clone(), q.scale2.clone(), q.fmt, q.layout, q.shape)
            for _ in range(l2_copies(q.nbytes))]


SPIN_CYCLES = 2_000_000  # ~1 ms at 1.98 GHz (6 ms at idle clocks): longer than the host's submission


def capture_graph(fn_list, inner):
    """A CUDA graph of `inner` calls cycling over fn_list (after warm-up on a side stream)."""
    for f in fn_list[:2]:
        f()
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for f in fn_list[:2]:
            f()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(inner):
            fn_list[i % len(fn_list)]()
    g.replay()
    torch.cuda.synchronize()
    return g


def replay_time(g, spin=True):
    """Seconds of one replay of g between two events, a spin kernel holding the stream before them (or, with
    spin=False, the method before session 28: the events on an idle stream)."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if spin:
        torch.cuda._sleep(SPIN_CYCLES)
    a.record()
    g.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e-3


def graph_time(fn_list, reps=7, inner=None):
    """Steady-state seconds per call of the callables in fn_list (cycled): the difference of the median
    replay times of graphs of 8 * inner and inner calls, over the 7 * inner calls between them."""
    inner = inner or len(fn_list)
    short, long_ = capture_graph(fn_list, inner), capture_graph(fn_list, 8 * inner)
    t1, t8 = [], []
    for _ in range(reps):  # alternated, so drifts of clock or temperature reach both
        t1.append(replay_time(short))
        t8.append(replay_time(long_))
    del short, long_
    return (statistics.median(t8) - statistics.median(t1)) / (7 * inner)


def copy_bandwidth():
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    src.random_(0, 255)
    dst = torch.empty_like(src)
    t = graph_time([lambda: dst.copy_(src)], reps=9, inner=5)
    return 2 * n / t


def read_bandwidth():
    n = 1 << 30
    src = torch.empty(n // 4, dtype=torch.int32, device="cuda")
    src.random_(0, 1 << 30)
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def _read(src_ptr, out_ptr, n_elem, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            nprog = tl.num_programs(0)
            acc = tl.zeros([BLOCK], dtype=tl.int32)
            for start in range(pid * BLOCK, n_elem, nprog * BLOCK):
                offs = start + tl.arange(0, BLOCK)
                acc ^= tl.load(src_ptr + offs, mask=offs < n_elem)
            tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), acc)

        sms = torch.cuda.get_device_properties(0).multi_processor_count
        block, grid = 4096, sms * 8
        out = torch.empty(grid * block, dtype=torch.int32, device="cuda")
        fn = lambda: _read[(grid,)](src, out, src.numel(), BLOCK=block, num_warps=8)
        how = "triton read kernel"
    except Exception as e:  # no triton: torch's reduction
        fn = lambda: torch.amax(src)
        how = f"torch.amax (triton unavailable: {type(e).__name__})"
    t = graph_time([fn], reps=9, inner=5)
    return n / t, how


CONVERT_DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def bench_convert(fmt, dtype=torch.bfloat16, n_rows=8192, n_cols=8192):
    w = torch.randn(n_rows, n_cols, dtype=dtype, device="cuda")
    q = fp4.quantize(w, fmt)
    out = {}
    tq = graph_time([lambda: torch.ops.vstack.fp4_quantize(w, fp4.FORMATS[fmt], 1)], reps=7, inner=5)
    tl = graph_time([lambda: torch.ops.vstack.fp4_quantize(w, fp4.FORMATS[fmt], 0)], reps=7, inner=5)
    esz = w.element_size()
    bq = w.numel() * esz * (2 if fmt == "nvfp4" else 1) + q.nbytes  # NVFP4 reads x twice (amax pass)
    td = graph_time([lambda: fp4.dequantize(q, dtype)], reps=7, inner=5)
    bd = q.nbytes + w.numel() * esz
    out["quantize_us"], out["quantize_GBps"] = tq * 1e6, bq / tq / 1e9  # GEMM layout (what matmul reads)
    out["quantize_linear_us"], out["quantize_linear_GBps"] = tl * 1e6, bq / tl / 1e9  # same bytes at 8192^2
    out["dequantize_us"], out["dequantize_GBps"] = td * 1e6, bd / td / 1e9
    return out


def bench_gemm(fmt, M, N, K, weights, x, hbm, hbm_read):
    fns = [(lambda q=q: fp4.matmul(x, q)) for q in weights]
    t = graph_time(fns, reps=7, inner=max(len(fns), 8))
    wbytes = weights[0].nbytes
    byts = wbytes + M * K * 2 + M * N * 2
    return {"us": t * 1e6, "GBps": byts / t / 1e9, "pct_hbm": 100 * byts / t / hbm,
            "pct_read": 100 * byts / t / hbm_read, "TFLOPS": 2 * M * N * K / t / 1e12}


def bench_torch(M, N, K, wts, x):
    fns = [(lambda w=w: torch.matmul(x, w.t())) for w in wts]
    t = graph_time(fns, reps=7, inner=max(len(fns), 8))
    byts = N * K * 2 + M * K * 2 + M * N * 2
    return {"us": t * 1e6, "GBps": byts / t / 1e9, "TFLOPS": 2 * M * N * K / t / 1e12}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer shapes and M values")
    ap.add_argument("--json", default=None)
    ap.add_argument("--formats", default="nvfp4,mxfp4,nf4,nf4_dq")
    ap.add_argument("--decode", action="store_true", help="M <= 16 only (the decode regime), all shapes")
    ap.add_argument("--shapes", default=None, help="comma-separated NxK weight shapes (default: all four)")
    ap.add_argument("--m", default=None, help="comma-separated M values (default: 1 ... 4096)")
    ap.add_argument("--no-convert", action="store_true", help="skip the quantize/dequantize benchmarks")
    ap.add_argument("--no-gemm", action="store_true")
    ap.add_argument("--convert-dtypes", default="bf16,f16,f32",
                    help="input dtypes of the quantize (and output of the dequantize) benchmarks")
    ap.add_argument("--x-dtype", default="bf16", choices=["bf16", "f16"],
                    help="the GEMM's x (and y, bias-free) dtype; torch's matmul runs in the same dtype")
    args = ap.parse_args()
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    print(f"device: {props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}", flush=True)
    hbm = copy_bandwidth()
    print(f"device-to-device copy: {hbm / 1e12:.3f} TB/s (read + write)", flush=True)
    hbm_read, how = read_bandwidth()
    print(f"read-only stream: {hbm_read / 1e12:.3f} TB/s ({how})", flush=True)
    res = {"device": props.name, "copy_TBps": hbm / 1e12, "read_TBps": hbm_read / 1e12, "convert": {}, "gemm": []}
    formats = args.formats.split(",")
    pc = lambda gbps: f"{100 * gbps * 1e9 / hbm:4.0f}% copy {100 * gbps * 1e9 / hbm_read:4.0f}% read"
    for dt, fmt in ([] if args.no_convert else
                    [(dt, fmt) for dt in args.convert_dtypes.split(",") for fmt in formats]):
        # JSON key: the format for bf16 (as before), "format/dtype" for the others
        res["convert"][fmt if dt == "bf16" else f"{fmt}/{dt}"] = c = bench_convert(fmt, CONVERT_DTYPES[dt])
        print(f"convert {fmt:7s} 8192x8192 {dt:4s}: quantize {c['quantize_us']:8.1f} us {c['quantize_GBps']:7.0f} GB/s"
              f" ({pc(c['quantize_GBps'])})  dequantize {c['dequantize_us']:8.1f} us "
              f"{c['dequantize_GBps']:7.0f} GB/s ({pc(c['dequantize_GBps'])})  linear-layout quantize "
              f"{c['quantize_linear_us']:6.1f} us ({pc(c['quantize_linear_GBps'])})", flush=True)
    shapes = list(bar.SHAPES)  # issue 3's bar shapes
    Ms = [1, 2, 4, 8, 16, 32, 128, 1024, 4096]
    if args.quick:
        shapes, Ms = [(8192, 8192)], [1, 16, 4096]
    if args.decode:
        Ms = [1, 2, 4, 8, 16]
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    if args.m:
        Ms = [int(v) for v in args.m.split(",")]
    if args.no_gemm:
        shapes = []
    xdt = CONVERT_DTYPES[args.x_dtype]
    res["x_dtype"] = args.x_dtype
    for N, K in shapes:
        w = torch.randn(N, K, dtype=xdt, device="cuda") * 0.02
        wts = weight_copies(w)
        qs = {fmt: fp4_copies(fp4.quantize(w, fmt)) for fmt in formats}
        for M in Ms:
            x = torch.randn(M, K, dtype=xdt, device="cuda")
            tb = bench_torch(M, N, K, wts, x)
            row = {"N": N, "K": K, "M": M, f"torch_{args.x_dtype}": tb}
            line = f"N={N:5d} K={K:5d} M={M:4d} | torch {args.x_dtype} {tb['us']:8.1f} us {tb['TFLOPS']:6.1f} TF"
            for fmt in formats:
                r = bench_gemm(fmt, M, N, K, qs[fmt], x, hbm, hbm_read)
                r["speedup_vs_torch"] = tb["us"] / r["us"]
                row[fmt] = r
                line += (f" | {fmt} {r['us']:7.1f} us {r['pct_read']:5.1f}%rd {r['pct_hbm']:5.1f}%cp"
                         f" {r['TFLOPS']:6.1f} TF x{r['speedup_vs_torch']:.2f}")
            print(line, flush=True)
            res["gemm"].append(row)
        del wts, qs
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
