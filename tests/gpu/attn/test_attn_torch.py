#!/usr/bin/env python3
"""GPU tests of vstack.attn through torch: forward (O, LSE) and gradients (dq, dk, dv) against an
fp32 reference, with flash-attention's rule: max|ours - fp32| <= 2 * max|torch in bf16/fp16 - fp32|
+ atol (atol = one rounding unit of the dtype at 1/8); fresh random inputs every run; fixed and
variable lengths, both layouts, GQA/MQA, decode; torch.compile(fullgraph=True); the SDPA helper;
the error messages. Exit status 0 only if every check passed.
Usage: VSTACK_KERNELS_LIB=BUILD/kernels/libvstack_kernels.so python3 test_attn_torch.py [--quick]
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import vstack.attn as va  # noqa: E402

QUICK = "--quick" in sys.argv
failures = []
checks = 0


def report(ok, name, detail=""):
    global checks
    checks += 1
    print(("ok   " if ok else "FAIL ") + name + (": " + detail if detail else ""), flush=True)
    if not ok:
        failures.append(name)


def ref_attention(q, k, v, causal, scale):
    """q [B, Hq, Sq, D], k, v [B, Hkv, Sk, D] in whatever dtype they come in (the math runs in it);
    bottom-right causal; rows that see no key give O = 0 and LSE = +inf."""
    B, Hq, Sq, D = q.shape
    Hkv, Sk = k.shape[1], k.shape[2]
    g = Hq // Hkv
    k = k.repeat_interleave(g, dim=1)
    v = v.repeat_interleave(g, dim=1)
    s = torch.matmul(q * scale, k.transpose(-1, -2))
    empty = None
    if causal:
        i = torch.arange(Sq, device=q.device)[:, None]
        j = torch.arange(Sk, device=q.device)[None, :]
        masked = j > i + (Sk - Sq)
        empty = masked.all(dim=-1, keepdim=True)  # rows that see no key: kept finite, zeroed below
        s = s.masked_fill(masked & ~empty, float("-inf"))
    lse = torch.logsumexp(s.float(), dim=-1)
    p = torch.softmax(s, dim=-1)
    if empty is not None:
        p = p.masked_fill(empty, 0.0)
        lse = lse.masked_fill(empty[:, 0], float("inf"))
    o = torch.matmul(p, v)
    return o, lse


def max_err(a, b):
    a, b = a.float(), b.float()
    both_inf = torch.isinf(a) & torch.isinf(b) & (a == b)
    if bool(((torch.isinf(a) | torch.isinf(b)) & ~both_inf).any()) or bool(torch.isnan(a).any()):
        return float("inf")
    d = (a - b).abs()
    d[both_inf] = 0
    return d.max().item() if d.numel() else 0.0


def rule(name, ours, ref32, lowp, dtype):
    atol = (1 / 256 if dtype == torch.bfloat16 else 1 / 2048) / 8
    e, el = max_err(ours, ref32), max_err(lowp, ref32)
    ok = e <= 2 * el + atol
    return ok, f"{name} {e:.2e}/{el:.2e}{'' if ok else '(!)'}"


def check_case(dtype, d, B, Hq, Hkv, Sq, Sk, causal, layout="bhsd", grads=True):
    dev = "cuda"
    scale = 1.3 / math.sqrt(d)
    q = torch.randn(B, Hq, Sq, d, device=dev, dtype=dtype)
    k = torch.randn(B, Hkv, Sk, d, device=dev, dtype=dtype)
    v = torch.randn(B, Hkv, Sk, d, device=dev, dtype=dtype)
    do = torch.randn(B, Hq, Sq, d, device=dev, dtype=dtype)
    q32, k32, v32 = (t.float().requires_grad_() for t in (q, k, v))
    ql, kl, vl = (t.clone().requires_grad_() for t in (q, k, v))
    o32, lse32 = ref_attention(q32, k32, v32, causal, scale)
    ol, lsel = ref_attention(ql, kl, vl, causal, scale)
    if layout == "bshd":
        qo, ko, vo = (t.transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))
        o, lse = va.flash_attention_with_lse(qo, ko, vo, causal=causal, scale=scale, layout="bshd")
        o_b = o.transpose(1, 2)
    else:
        qo, ko, vo = (t.clone().requires_grad_() for t in (q, k, v))
        o, lse = va.flash_attention_with_lse(qo, ko, vo, causal=causal, scale=scale)
        o_b = o
    results = [rule("O", o_b, o32, ol, dtype), rule("LSE", lse, lse32, lsel.float(), dtype)]
    if grads:
        o32.backward(do.float())
        ol.backward(do)
        o_b.backward(do)
        g = [t.grad.transpose(1, 2) if layout == "bshd" else t.grad for t in (qo, ko, vo)]
        for n, ours, r32, rl in zip(("dQ", "dK", "dV"), g, (q32.grad, k32.grad, v32.grad), (ql.grad, kl.grad, vl.grad)):
            results.append(rule(n, ours, r32, rl, dtype))
    ok = all(r[0] for r in results)
    name = f"{str(dtype)[6:]} d{d} b{B} h{Hq}/{Hkv} sq{Sq} sk{Sk} {'causal' if causal else 'full'} {layout}"
    report(ok, name, " ".join(r[1] for r in results))


def check_varlen(dtype, d, causal):
    dev = "cuda"
    Hq, Hkv = 4, 2
    lens_q = [130, 0, 67, 1]
    lens_k = [150, 33, 67, 300]
    scale = 1 / math.sqrt(d)
    cu_q = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32, device=dev)
    cu_k = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32, device=dev)
    q = torch.randn(sum(lens_q), Hq, d, device=dev, dtype=dtype, requires_grad=True)
    k = torch.randn(sum(lens_k), Hkv, d, device=dev, dtype=dtype, requires_grad=True)
    v = torch.randn(sum(lens_k), Hkv, d, device=dev, dtype=dtype, requires_grad=True)
    do = torch.randn_like(q)
    o, lse = va.flash_attention_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=causal, scale=scale,
                                       return_lse=True)
    o.backward(do)
    results = []
    o_r32, o_rl, lse32s, lsels = [], [], [], []
    dq32 = torch.zeros(q.shape, device=dev)
    dk32 = torch.zeros(k.shape, device=dev)
    dv32 = torch.zeros(v.shape, device=dev)
    dql, dkl, dvl = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for b in range(len(lens_q)):
        a0, a1, k0, k1 = cu_q[b].item(), cu_q[b + 1].item(), cu_k[b].item(), cu_k[b + 1].item()
        if a1 == a0:
            continue
        sl = lambda t, x0, x1: t.detach()[x0:x1].transpose(0, 1).unsqueeze(0)  # noqa: E731
        for dt, outs, lses, grads in ((torch.float32, o_r32, lse32s, (dq32, dk32, dv32)),
                                      (dtype, o_rl, lsels, (dql, dkl, dvl))):
            qq, kk, vv = (sl(t, x0, x1).to(dt).requires_grad_() for t, x0, x1 in
                          ((q, a0, a1), (k, k0, k1), (v, k0, k1)))
            ob, lb = ref_attention(qq, kk, vv, causal, scale)
            ob.backward(sl(do, a0, a1).to(dt))
            outs.append(ob[0].transpose(0, 1))
            lses.append(lb[0])
            grads[0][a0:a1] += qq.grad[0].transpose(0, 1).to(grads[0].dtype)
            grads[1][k0:k1] += kk.grad[0].transpose(0, 1).to(grads[1].dtype)
            grads[2][k0:k1] += vv.grad[0].transpose(0, 1).to(grads[2].dtype)
    results.append(rule("O", o, torch.cat(o_r32), torch.cat(o_rl), dtype))
    results.append(rule("LSE", lse, torch.cat(lse32s, dim=1), torch.cat(lsels, dim=1).float(), dtype))
    for n, ours, r32, rl in zip(("dQ", "dK", "dV"), (q.grad, k.grad, v.grad), (dq32, dk32, dv32), (dql, dkl, dvl)):
        results.append(rule(n, ours, r32, rl, dtype))
    report(all(r[0] for r in results), f"varlen {str(dtype)[6:]} d{d} {'causal' if causal else 'full'}",
           " ".join(r[1] for r in results))


def check_compile():
    dev = "cuda"
    q = torch.randn(2, 8, 256, 128, device=dev, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(2, 2, 256, 128, device=dev, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(2, 2, 256, 128, device=dev, dtype=torch.bfloat16, requires_grad=True)

    def f(q, k, v):
        return (va.flash_attention(q, k, v, causal=True) * 2).sum()

    eager = f(q, k, v)
    ge = torch.autograd.grad(eager, (q, k, v))
    cf = torch.compile(f, fullgraph=True)
    comp = cf(q, k, v)
    gc = torch.autograd.grad(comp, (q, k, v))
    ok = torch.equal(eager, comp) and all(torch.equal(a, b) for a, b in zip(ge, gc))
    report(ok, "torch.compile(fullgraph=True) fwd+bwd equals eager")


def check_sdpa_helper():
    dev = "cuda"

    class Block(torch.nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    q, k, v = (torch.randn(1, 4, 200, 64, device=dev, dtype=torch.float16) for _ in range(3))
    m = Block()
    base = m(q, k, v)
    with va.use_flash_attention():
        routed = m(q, k, v)
        # Unsupported (an explicit mask) falls back to torch's.
        mask = torch.ones(200, 200, device=dev, dtype=torch.bool).tril()
        fallback = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    ours = va.flash_attention(q, k, v, causal=True)
    restored = F.scaled_dot_product_attention is va._torch_sdpa
    ok = torch.equal(routed, ours) and restored and max_err(routed, base) < 1e-2 and max_err(fallback, base) < 1e-2
    report(ok, "use_flash_attention routes F.scaled_dot_product_attention, falls back, restores")


def check_errors():
    dev = "cuda"
    cases = [
        ("float32", (torch.randn(1, 2, 8, 64, device=dev),) * 3, {}, TypeError, "dtype"),
        ("head dim 96", (torch.randn(1, 2, 8, 96, device=dev, dtype=torch.bfloat16),) * 3, {}, ValueError, "96"),
        ("cpu", (torch.randn(1, 2, 8, 64, dtype=torch.bfloat16),) * 3, {}, ValueError, "cpu"),
        ("layout", (torch.randn(1, 2, 8, 64, device=dev, dtype=torch.bfloat16),) * 3, {"layout": "sbhd"}, ValueError,
         "layout"),
        ("heads", (torch.randn(1, 3, 8, 64, device=dev, dtype=torch.bfloat16),
                   torch.randn(1, 2, 8, 64, device=dev, dtype=torch.bfloat16),
                   torch.randn(1, 2, 8, 64, device=dev, dtype=torch.bfloat16)), {}, ValueError, "multiple"),
    ]
    for name, args, kw, exc, text in cases:
        try:
            va.flash_attention(*args, **kw)
            report(False, f"error for {name}", "no exception")
        except exc as e:
            report(text in str(e), f"error for {name}", str(e)[:120])


def main():
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    shapes = [(2, 4, 4, 128, 128), (1, 6, 2, 77, 201), (2, 1, 1, 300, 123), (1, 8, 1, 1, 1500),
              (1, 16, 16, 65, 65), (1, 32, 8, 1, 4096)]
    if QUICK:
        shapes = shapes[:4]
    for dtype in (torch.bfloat16, torch.float16):
        for d in (64, 128, 256):
            for causal in (False, True):
                for s in shapes:
                    check_case(dtype, d, *s, causal)
                check_case(dtype, d, 2, 4, 2, 100, 257, causal, layout="bshd")
                # More work tiles (query blocks x heads x batch) than SMs, many key tiles, none a multiple
                # of the tile sizes: the sm90 forward's stage rounds and grid (forward only, O and LSE).
                check_case(dtype, d, 2, 16, 8, 1100, 1300, causal, grads=False)
                check_varlen(dtype, d, causal)
    check_compile()
    check_sdpa_helper()
    check_errors()
    print(f"test_attn_torch: {checks} checks, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
