"""vstack.fp4 / vstack.nn on a GPU: ops vs torch on decoded weights, torch.compile tracing, error paths.
Run by tests/gpu/quant/run.sh (needs torch with CUDA and libvstack_kernels.so)."""

import ctypes
import sys

import torch

import vstack.fp4 as fp4
import vstack.nn as vnn

FAILS = []


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def raises(exc, fn, what):
    try:
        fn()
    except exc as e:
        expect(True, f"{what} -> {exc.__name__}: {str(e)[:90]}")
        return
    except Exception as e:  # wrong exception type
        expect(False, f"{what} raised {type(e).__name__}: {e}")
        return
    expect(False, f"{what} did not raise")


def main():
    torch.manual_seed(torch.seed())  # fresh inputs every run
    dev = "cuda"
    targets = {"nvfp4": 0.00904, "mxfp4": 0.01315, "nf4": 0.00843}
    w = torch.randn(4096, 4096, device=dev)
    for fmt, want in targets.items():
        q = fp4.quantize(w, fmt)
        d = fp4.dequantize(q, torch.float32)
        mse = ((d - w) ** 2).sum().item() / (w ** 2).sum().item()
        expect(abs(mse / want - 1) < 0.02, f"{fmt}: relative MSE on N(0,1) {mse:.5f} vs {want}")
        lin = fp4.quantize(w, fmt, layout="linear")
        expect(torch.equal(fp4.dequantize(lin, torch.float32), d), f"{fmt}: linear and GEMM layouts decode alike")

    # the Python buffer sizes (SymInt arithmetic) are the C API's, and MXFP4 carries its range flag
    lib = fp4._clib()
    st = ctypes.c_size_t
    lib.vstack_fp4_sizes.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
                                     ctypes.POINTER(st), ctypes.POINTER(st), ctypes.POINTER(st)]
    for fmt in ["nvfp4", "mxfp4", "nf4", "nf4_dq"]:
        f = fp4.FORMATS[fmt]
        for layout, rows, cols in [(0, 3, 64 * 300), (1, 17, 192), (1, 4096, 14336)]:
            c = [st(), st(), st()]
            rc = lib.vstack_fp4_sizes(f, layout, rows, cols, *[ctypes.byref(v) for v in c])
            expect(rc == 0 and tuple(v.value for v in c) == fp4._sizes(f, layout, rows, cols),
                   f"{fmt} layout {layout} {rows}x{cols}: sizes {fp4._sizes(f, layout, rows, cols)} as the C API's")
    for scale, level in [(1.0, 2.0), (2.0 ** -20, 1.0), (2.0 ** -80, 0.0)]:
        q = fp4.quantize(torch.randn(256, 512, device=dev) * scale, "mxfp4")
        expect(q.scale2.tolist() == [level], f"mxfp4: N(0,1) * {scale:g} gets the range flag {level}")
        for layout, rows in [("gemm", 256), ("gemm", 200), ("linear", 200)]:  # 200: GEMM padding rows skipped
            qq = fp4.quantize(torch.randn(rows, 512, device=dev) * scale, "mxfp4", layout=layout)
            got = fp4.mxfp4_range_flag(qq.scales, rows, 512, layout).tolist()
            expect(got == qq.scale2.tolist() == [level],
                   f"mxfp4_range_flag {layout} {rows}x512, N(0,1) * {scale:g}: {got} as quantize's {level}")
    # a zero row: quantize counts its blocks (byte 0, codes 0) as folding, the bytes alone cannot
    wz = torch.randn(200, 512, device=dev)
    wz[37] = 0
    qz = fp4.quantize(wz, "mxfp4")
    got = fp4.mxfp4_range_flag(qz.scales, 200, 512).tolist()
    expect(qz.scale2.tolist() == [2.0] and got == [0.0], f"zero row: quantize's flag 2, the bytes' {got}")

    # an MXFP4 FP4Linear saved before the flag (empty scale2) loads with the flag from its scale bytes
    lin = torch.nn.Linear(512, 200, device=dev, dtype=torch.bfloat16)
    m = vnn.FP4Linear.from_linear(lin, "mxfp4")
    sd = {k: v.cpu() for k, v in m.state_dict().items()}
    sd["scale2"] = torch.empty(0)
    m2 = vnn.FP4Linear(512, 200, "mxfp4", device=dev)
    m2.load_state_dict(sd)
    x = torch.randn(16, 512, device=dev, dtype=torch.bfloat16)
    expect(m2.scale2.tolist() == m.scale2.tolist() == [2.0] and torch.equal(m2(x), m(x)),
           f"FP4Linear mxfp4: a state_dict without the flag loads with {m2.scale2.tolist()}, same output")

    # NVFP4's range flag: 1 unless a block is not finite (its NaN scale byte); an FP4Linear saved with the tensor
    # scale alone loads with the flag from its scale bytes, and gives the same y at M > 8 (the wide instances
    # check the flag: Note [NVFP4 shifted pairs]) as the module it was saved from
    wn = torch.randn(8192, 1024, device=dev)
    expect(fp4.quantize(wn, "nvfp4").scale2[1].item() == 1.0, "nvfp4: N(0,1) gets the range flag 1")
    wn[100, 7] = float("nan")
    qn = fp4.quantize(wn, "nvfp4")
    expect(qn.scale2[1].item() == 0.0 and fp4.nvfp4_range_flag(qn.scales).tolist() == [0.0],
           "nvfp4: a NaN block gets the range flag 0, as its bytes say")
    lin = torch.nn.Linear(1024, 8192, device=dev, dtype=torch.bfloat16)
    m = vnn.FP4Linear.from_linear(lin, "nvfp4")
    sd = {k: v.cpu() for k, v in m.state_dict().items()}
    sd["scale2"] = sd["scale2"][:1].clone()
    m2 = vnn.FP4Linear(1024, 8192, "nvfp4", device=dev)
    m2.load_state_dict(sd)
    x = torch.randn(12, 1024, device=dev, dtype=torch.bfloat16)
    expect(m2.scale2.tolist() == m.scale2.tolist() and m.scale2[1].item() == 1.0 and torch.equal(m2(x), m(x)),
           f"FP4Linear nvfp4: a state_dict without the flag loads with {m2.scale2.tolist()}, same output")
    raises(ValueError, lambda: fp4.matmul(x, fp4.FP4Tensor(m.codes, m.scales, m.scale2[:1], "nvfp4", "gemm",
                                                           (8192, 1024))), "matmul, NVFP4 scale2 without the flag")

    for fmt in ["nvfp4", "mxfp4", "nf4", "nf4_dq"]:
        for dt in (torch.bfloat16, torch.float16):
            for shape in [(1, 512), (3, 7, 512), (300, 512)]:
                x = torch.randn(*shape, device=dev, dtype=dt)
                wt = torch.randn(200, 512, device=dev, dtype=dt) * 0.05
                b = torch.randn(200, device=dev, dtype=dt)
                q = fp4.quantize(wt, fmt)
                y = fp4.matmul(x, q, b)
                ref = x.double() @ fp4.dequantize(q, torch.float32).double().t() + b.double()
                rel = ((y.double() - ref).norm() / ref.norm()).item()
                bound = 4e-3 if dt == torch.bfloat16 else 1e-3
                expect(y.shape == (*shape[:-1], 200) and rel < bound,
                       f"matmul {fmt} {dt} x{tuple(shape)}: rel err {rel:.2e} < {bound}")

    lin = torch.nn.Linear(512, 384, device=dev, dtype=torch.bfloat16)
    m = vnn.FP4Linear.from_linear(lin, "nvfp4")
    x = torch.randn(2, 5, 512, device=dev, dtype=torch.bfloat16)
    eager = m(x)
    compiled = torch.compile(lambda t: torch.relu(m(t)) * 2, fullgraph=True)(x)
    expect(torch.equal(compiled, torch.relu(eager) * 2), "torch.compile(fullgraph=True) traces FP4Linear")
    qc = torch.compile(lambda t: fp4.dequantize(fp4.quantize(t, "mxfp4"), torch.bfloat16), fullgraph=True)(lin.weight)
    expect(torch.equal(qc, fp4.dequantize(fp4.quantize(lin.weight, "mxfp4"), torch.bfloat16)),
           "torch.compile(fullgraph=True) traces quantize + dequantize")
    rel = ((eager.float() - lin(x).float()).norm() / lin(x).float().norm()).item()
    expect(rel < 0.15, f"FP4Linear vs nn.Linear: rel err {rel:.3f} (quantisation error)")

    raises(ValueError, lambda: fp4.quantize(torch.randn(64, 64), "nvfp4"), "quantize a CPU tensor")
    raises(ValueError, lambda: fp4.quantize(w, "fp5"), "unknown format")
    raises(ValueError, lambda: fp4.quantize(torch.randn(64, 96, device=dev), "nf4", layout="gemm"), "GEMM layout, K=96")
    q = fp4.quantize(torch.randn(128, 256, device=dev, dtype=torch.bfloat16), "nvfp4")
    raises(TypeError, lambda: fp4.matmul(torch.randn(4, 256, device=dev), q), "matmul with float32 x")
    raises(ValueError, lambda: fp4.matmul(torch.randn(4, 192, device=dev, dtype=torch.bfloat16), q), "matmul, wrong K")
    raises(ValueError, lambda: fp4.matmul(torch.randn(4, 256, device=dev, dtype=torch.bfloat16), q,
                                          torch.randn(7, device=dev, dtype=torch.bfloat16)), "matmul, wrong bias")
    raises(ValueError, lambda: vnn.FP4Linear(100, 10), "FP4Linear with in_features=100")
    print(f"test_fp4_torch: {len(FAILS)} failed", flush=True)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
