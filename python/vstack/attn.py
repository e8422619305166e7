"""Flash attention (libvstack_kernels.so, attn/) as torch.library custom ops.

    vstack.attn.flash_attention(q, k, v, causal=False, scale=None, layout="bhsd")
        q [B, Hq, Sq, D], k and v [B, Hkv, Sk, D] ("bhsd", the layout of
        scaled_dot_product_attention) or [B, S, H, D] ("bshd"). Returns O in q's layout.
    vstack.attn.flash_attention_with_lse(...)  -> (O, LSE [B, Hq, Sq] float32)
    vstack.attn.flash_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                       max_seqlen_k, causal=False, scale=None)
        q [total_q, Hq, D], k and v [total_k, Hkv, D], cu_seqlens int32 [B + 1] on the GPU.
    vstack.attn.sdpa(...)       a drop-in scaled_dot_product_attention that uses the kernels
                                where they apply and falls back to torch's otherwise;
    vstack.attn.use_flash_attention()  a context manager (also usable as a plain call that
                                returns an undo function) that routes
                                torch.nn.functional.scaled_dot_product_attention to sdpa().

Semantics: GQA/MQA (Hq a multiple of Hkv), head_dim 64/128/256, float16/bfloat16, causal
masks aligned bottom-right when Sq != Sk (flash-attention's convention; sdpa() only routes
causal calls with Sq == Sk, where torch's top-left alignment is the same). Differentiable in
q, k, v; torch.compile(fullgraph=True) traces the ops through their fake implementations.
"""

import ctypes
import math
from typing import Optional, Tuple

import torch

from ._lib import check, lib

__all__ = [
    "flash_attention",
    "flash_attention_with_lse",
    "flash_attention_varlen",
    "sdpa",
    "use_flash_attention",
    "SUPPORTED_HEAD_DIMS",
]

SUPPORTED_HEAD_DIMS = (64, 128, 256)
_DTYPES = {torch.float16: 1, torch.bfloat16: 2}  # vstack_dtype_t


class _Tensor(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("batch_stride", ctypes.c_int64),
                ("head_stride", ctypes.c_int64), ("row_stride", ctypes.c_int64)]


class _Lse(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("batch_stride", ctypes.c_int64), ("head_stride", ctypes.c_int64)]


class _Shape(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("batch", ctypes.c_int32), ("heads_q", ctypes.c_int32),
                ("heads_kv", ctypes.c_int32), ("seqlen_q", ctypes.c_int32), ("seqlen_k", ctypes.c_int32),
                ("head_dim", ctypes.c_int32), ("cu_seqlens_q", ctypes.c_void_p),
                ("cu_seqlens_k", ctypes.c_void_p), ("total_q", ctypes.c_int32), ("scale", ctypes.c_float),
                ("causal", ctypes.c_int32)]


class _FwdArgs(ctypes.Structure):
    _fields_ = [("shape", _Shape), ("q", _Tensor), ("k", _Tensor), ("v", _Tensor), ("o", _Tensor),
                ("lse", _Lse), ("num_splits", ctypes.c_int32), ("workspace", ctypes.c_void_p),
                ("workspace_bytes", ctypes.c_size_t)]


class _BwdArgs(ctypes.Structure):
    _fields_ = [("shape", _Shape), ("q", _Tensor), ("k", _Tensor), ("v", _Tensor), ("o", _Tensor),
                ("dout", _Tensor), ("lse", _Lse), ("dq", _Tensor), ("dk", _Tensor), ("dv", _Tensor),
                ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t)]


_bound = False


def _l():
    global _bound
    l = lib()
    if not _bound:
        for name, args in (("vstack_attn_fwd_workspace_size", [ctypes.POINTER(_FwdArgs), ctypes.POINTER(ctypes.c_size_t)]),
                           ("vstack_attn_fwd", [ctypes.POINTER(_FwdArgs), ctypes.c_void_p]),
                           ("vstack_attn_bwd_workspace_size", [ctypes.POINTER(_BwdArgs), ctypes.POINTER(ctypes.c_size_t)]),
                           ("vstack_attn_bwd", [ctypes.POINTER(_BwdArgs), ctypes.c_void_p])):
            f = getattr(l, name)
            f.argtypes = args
            f.restype = ctypes.c_int
        _bound = True
    return l


# Which dimension of a tensor is (batch, head, row) for each layout; head_dim is last.
_DIMS = {"bhsd": (0, 1, 2), "bshd": (0, 2, 1), "thd": (None, 1, 0)}


def _usable(t: torch.Tensor) -> torch.Tensor:
    """t itself if the kernels can read it in place (last dim contiguous, 16-byte strides
    and base), else a contiguous copy."""
    ok = t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and all(
        s % 8 == 0 for i, s in enumerate(t.stride()[:-1]) if t.shape[i] > 1)
    return t if ok else t.contiguous()


def _desc(t: torch.Tensor, layout: str) -> _Tensor:
    b, h, r = _DIMS[layout]
    return _Tensor(t.data_ptr(), t.stride(b) if b is not None else 0, t.stride(h), t.stride(r))


def _sizes(q, k, layout):
    """(batch, heads_q, heads_kv, seqlen_q, seqlen_k) as the tensors say (varlen: rows)."""
    b, h, r = _DIMS[layout]
    return (q.shape[b] if b is not None else 1, q.shape[h], k.shape[h], q.shape[r], k.shape[r])


def _check_inputs(q, k, v, layout, what):
    if layout not in _DIMS:
        raise ValueError(f"{what}: layout {layout!r}: expected 'bhsd' ([B, H, S, D]) or 'bshd' ([B, S, H, D])")
    nd = 3 if layout == "thd" else 4
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{what}: {name} must be a torch.Tensor")
        if t.dim() != nd:
            raise ValueError(f"{what}: {name} has {t.dim()} dimensions, layout {layout!r} needs {nd}")
        if t.device.type != "cuda":
            raise ValueError(f"{what}: {name} is on {t.device}; the kernels run on CUDA devices (Hopper)")
        if t.dtype not in _DTYPES:
            raise TypeError(f"{what}: {name} has dtype {t.dtype}; supported are torch.float16 and torch.bfloat16")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"{what}: q, k, v dtypes differ ({q.dtype}, {k.dtype}, {v.dtype})")
    if not (q.device == k.device == v.device):
        raise ValueError(f"{what}: q, k, v are on different devices")
    d = q.shape[-1]
    if d not in SUPPORTED_HEAD_DIMS or k.shape[-1] != d or v.shape[-1] != d:
        raise ValueError(f"{what}: head dims q {q.shape[-1]}, k {k.shape[-1]}, v {v.shape[-1]}: "
                         f"all must be equal and one of {SUPPORTED_HEAD_DIMS}")
    if k.shape != v.shape:
        raise ValueError(f"{what}: k {tuple(k.shape)} and v {tuple(v.shape)} differ in shape")
    b, h, r = _DIMS[layout]
    if b is not None and k.shape[b] != q.shape[b]:
        raise ValueError(f"{what}: batch of q ({q.shape[b]}) and k ({k.shape[b]}) differ")
    if q.shape[h] % k.shape[h] != 0:
        raise ValueError(f"{what}: query heads ({q.shape[h]}) must be a multiple of key/value heads ({k.shape[h]})")


def _shape(q, k, layout, causal, scale, cu_q=None, cu_k=None, max_q=0, max_k=0):
    batch, hq, hkv, sq, sk = _sizes(q, k, layout)
    total_q = sq * batch
    if cu_q is not None:
        batch, total_q, sq, sk = cu_q.shape[0] - 1, q.shape[0], max_q, max_k
    return _Shape(_DTYPES[q.dtype], batch, hq, hkv, sq, sk, q.shape[-1],
                  cu_q.data_ptr() if cu_q is not None else None, cu_k.data_ptr() if cu_k is not None else None,
                  total_q, scale, 1 if causal else 0)


def _lse_empty(q, layout, cu_q):
    batch, hq, _, sq, _ = _sizes(q, q, layout)
    if cu_q is not None:
        return torch.empty((hq, q.shape[0]), dtype=torch.float32, device=q.device)
    return torch.empty((batch, hq, sq), dtype=torch.float32, device=q.device)


def _lse_desc(lse, varlen):
    if varlen:
        return _Lse(lse.data_ptr(), 0, lse.stride(0))
    return _Lse(lse.data_ptr(), lse.stride(0), lse.stride(1))


class _NoOp:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NOOP = _NoOp()


def _on_device(device):
    """torch.cuda.device(device) only when it is not already current (entering it costs
    microseconds, which show at decode sizes)."""
    return _NOOP if device.index is None or device.index == torch.cuda.current_device() else torch.cuda.device(device)


def _fwd_impl(q, k, v, cu_q, cu_k, max_q, max_k, causal, scale, layout, num_splits=0):
    q, k, v = _usable(q), _usable(k), _usable(v)
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = _lse_empty(q, layout, cu_q)
    if q.numel() == 0:
        return o, lse
    a = _FwdArgs()
    a.shape = _shape(q, k, layout, causal, scale, cu_q, cu_k, max_q, max_k)
    a.q, a.k, a.v, a.o = (_desc(t, layout) for t in (q, k, v, o))
    a.lse = _lse_desc(lse, cu_q is not None)
    a.num_splits = num_splits
    l = _l()
    with _on_device(q.device):
        n = ctypes.c_size_t(0)
        check(l.vstack_attn_fwd_workspace_size(ctypes.byref(a), ctypes.byref(n)), "vstack_attn_fwd_workspace_size")
        ws = torch.empty(n.value, dtype=torch.uint8, device=q.device) if n.value else None
        a.workspace = ws.data_ptr() if ws is not None else None
        a.workspace_bytes = n.value
        check(l.vstack_attn_fwd(ctypes.byref(a), torch.cuda.current_stream().cuda_stream), "vstack_attn_fwd")
    return o, lse


def _bwd_impl(dout, q, k, v, o, lse, cu_q, cu_k, max_q, max_k, causal, scale, layout):
    q, k, v, o, dout = (_usable(t) for t in (q, k, v, o, dout))
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    if q.numel() == 0 or k.numel() == 0:
        return dq.zero_(), dk.zero_(), dv.zero_()
    a = _BwdArgs()
    a.shape = _shape(q, k, layout, causal, scale, cu_q, cu_k, max_q, max_k)
    a.q, a.k, a.v, a.o, a.dout, a.dq, a.dk, a.dv = (_desc(t, layout) for t in (q, k, v, o, dout, dq, dk, dv))
    lse = lse.contiguous()
    a.lse = _lse_desc(lse, cu_q is not None)
    l = _l()
    with _on_device(q.device):
        n = ctypes.c_size_t(0)
        check(l.vstack_attn_bwd_workspace_size(ctypes.byref(a), ctypes.byref(n)), "vstack_attn_bwd_workspace_size")
        ws = torch.empty(max(n.value, 1), dtype=torch.uint8, device=q.device)
        a.workspace = ws.data_ptr()
        a.workspace_bytes = n.value
        check(l.vstack_attn_bwd(ctypes.byref(a), torch.cuda.current_stream().cuda_stream), "vstack_attn_bwd")
    return dq, dk, dv


# ---- custom ops: fixed length ----

@torch.library.custom_op("vstack::attn_fwd", mutates_args=())
def _attn_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float, layout: str,
              num_splits: int) -> Tuple[torch.Tensor, torch.Tensor]:
    return _fwd_impl(q, k, v, None, None, 0, 0, causal, scale, layout, num_splits)


@_attn_fwd.register_fake
def _(q, k, v, causal, scale, layout, num_splits):
    return torch.empty_like(q, memory_format=torch.contiguous_format), _lse_empty(q, layout, None)


@torch.library.custom_op("vstack::attn_bwd", mutates_args=())
def _attn_bwd(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
              lse: torch.Tensor, causal: bool, scale: float, layout: str
              ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _bwd_impl(dout, q, k, v, o, lse, None, None, 0, 0, causal, scale, layout)


@_attn_bwd.register_fake
def _(dout, q, k, v, o, lse, causal, scale, layout):
    f = torch.contiguous_format
    return torch.empty_like(q, memory_format=f), torch.empty_like(k, memory_format=f), torch.empty_like(v, memory_format=f)


def _fwd_setup(ctx, inputs, output):
    q, k, v, causal, scale, layout, _ = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.causal, ctx.scale, ctx.layout = causal, scale, layout


def _fwd_backward(ctx, do, dlse):
    # The gradient through LSE is not propagated (flash-attention does the same).
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = _attn_bwd(do, q, k, v, o, lse, ctx.causal, ctx.scale, ctx.layout)
    return dq, dk, dv, None, None, None, None


torch.library.register_autograd("vstack::attn_fwd", _fwd_backward, setup_context=_fwd_setup)


# ---- custom ops: variable length ----

@torch.library.custom_op("vstack::attn_varlen_fwd", mutates_args=())
def _attn_varlen_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_q: torch.Tensor, cu_k: torch.Tensor,
                     max_q: int, max_k: int, causal: bool, scale: float) -> Tuple[torch.Tensor, torch.Tensor]:
    return _fwd_impl(q, k, v, cu_q, cu_k, max_q, max_k, causal, scale, "thd")


@_attn_varlen_fwd.register_fake
def _(q, k, v, cu_q, cu_k, max_q, max_k, causal, scale):
    return torch.empty_like(q, memory_format=torch.contiguous_format), _lse_empty(q, "thd", cu_q)


@torch.library.custom_op("vstack::attn_varlen_bwd", mutates_args=())
def _attn_varlen_bwd(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                     lse: torch.Tensor, cu_q: torch.Tensor, cu_k: torch.Tensor, max_q: int, max_k: int,
                     causal: bool, scale: float) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _bwd_impl(dout, q, k, v, o, lse, cu_q, cu_k, max_q, max_k, causal, scale, "thd")


@_attn_varlen_bwd.register_fake
def _(dout, q, k, v, o, lse, cu_q, cu_k, max_q, max_k, causal, scale):
    f = torch.contiguous_format
    return torch.empty_like(q, memory_format=f), torch.empty_like(k, memory_format=f), torch.empty_like(v, memory_format=f)


def _varlen_setup(ctx, inputs, output):
    q, k, v, cu_q, cu_k, max_q, max_k, causal, scale = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse, cu_q, cu_k)
    ctx.max_q, ctx.max_k, ctx.causal, ctx.scale = max_q, max_k, causal, scale


def _varlen_backward(ctx, do, dlse):
    q, k, v, o, lse, cu_q, cu_k = ctx.saved_tensors
    dq, dk, dv = _attn_varlen_bwd(do, q, k, v, o, lse, cu_q, cu_k, ctx.max_q, ctx.max_k, ctx.causal, ctx.scale)
    return dq, dk, dv, None, None, None, None, None, None


torch.library.register_autograd("vstack::attn_varlen_fwd", _varlen_backward, setup_context=_varlen_setup)


# ---- public functions ----

def flash_attention_with_lse(q, k, v, causal: bool = False, scale: Optional[float] = None, layout: str = "bhsd",
                             num_splits: int = 0):
    """(O, LSE). LSE is float32 [B, Hq, Sq]; +inf on rows that see no key (causal, Sq > Sk).
    num_splits: split over keys (0 = let the library choose, 1 = never)."""
    _check_inputs(q, k, v, layout, "vstack.attn.flash_attention")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    return _attn_fwd(q, k, v, bool(causal), float(scale), layout, int(num_splits))


def flash_attention(q, k, v, causal: bool = False, scale: Optional[float] = None, layout: str = "bhsd"):
    """softmax(scale * q k^T [causal, bottom-right]) v; see the module docstring."""
    return flash_attention_with_lse(q, k, v, causal, scale, layout)[0]


def flash_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int, max_seqlen_k: int,
                           causal: bool = False, scale: Optional[float] = None, return_lse: bool = False):
    """Packed variable-length batch: q [total_q, Hq, D], k, v [total_k, Hkv, D]; sequence b is rows
    cu_seqlens[b] .. cu_seqlens[b+1]-1 (int32 on q's device). LSE (with return_lse) is [Hq, total_q]."""
    _check_inputs(q, k, v, "thd", "vstack.attn.flash_attention_varlen")
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if cu.dtype != torch.int32 or cu.dim() != 1 or cu.device != q.device:
            raise ValueError(f"vstack.attn.flash_attention_varlen: {name} must be a 1-D int32 tensor on {q.device}")
    if cu_seqlens_q.shape != cu_seqlens_k.shape or cu_seqlens_q.shape[0] < 2:
        raise ValueError("vstack.attn.flash_attention_varlen: cu_seqlens_q and cu_seqlens_k need batch + 1 entries each")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    o, lse = _attn_varlen_fwd(q, k, v, cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous(), int(max_seqlen_q),
                              int(max_seqlen_k), bool(causal), float(scale))
    return (o, lse) if return_lse else o


_torch_sdpa = torch.nn.functional.scaled_dot_product_attention


def _sdpa_supported(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa):
    if attn_mask is not None or dropout_p != 0.0:
        return False
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or q.device.type != "cuda":
        return False
    if q.dtype not in _DTYPES or not (q.dtype == k.dtype == v.dtype):
        return False
    if q.shape[-1] not in SUPPORTED_HEAD_DIMS or k.shape[-1] != q.shape[-1] or v.shape != k.shape:
        return False
    if q.shape[0] != k.shape[0] or (q.shape[1] != k.shape[1] and not (enable_gqa and q.shape[1] % k.shape[1] == 0)):
        return False
    # torch aligns a causal mask top-left; ours is bottom-right. They agree when Sq == Sk.
    if is_causal and q.shape[2] != k.shape[2]:
        return False
    return torch.cuda.get_device_capability(q.device)[0] >= 9


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False, **kw):
    """torch.nn.functional.scaled_dot_product_attention, run by vstack's kernels where they apply
    (no mask, no dropout, f16/bf16, head_dim 64/128/256, Hopper), by torch's otherwise."""
    if kw or not _sdpa_supported(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa):
        return _torch_sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                           scale=scale, enable_gqa=enable_gqa, **kw)
    return flash_attention(query, key, value, causal=is_causal, scale=scale)


class use_flash_attention:
    """Route torch.nn.functional.scaled_dot_product_attention to vstack.attn.sdpa.

        with vstack.attn.use_flash_attention():
            loss = model(x)           # every F.scaled_dot_product_attention call inside

    or `undo = vstack.attn.use_flash_attention().enable()` ... `undo()`. Affects code that looks the
    function up as torch.nn.functional.scaled_dot_product_attention (or F.scaled_dot_product_attention)
    at call time, which is how torch.nn.MultiheadAttention and most model code call it."""

    def enable(self):
        self._saved = torch.nn.functional.scaled_dot_product_attention
        torch.nn.functional.scaled_dot_product_attention = sdpa
        return self.disable

    def disable(self):
        torch.nn.functional.scaled_dot_product_attention = self._saved

    def __enter__(self):
        self.enable()
        return self

    def __exit__(self, *exc):
        self.disable()
        return False
