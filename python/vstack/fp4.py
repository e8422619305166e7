"""FP4 weight quantisation (NVFP4, MXFP4, NF4) and the fused dequant-GEMM.

    q = vstack.fp4.quantize(w, "nvfp4")          # w: [N, K] cuda tensor (f32/f16/bf16)
    y = vstack.fp4.matmul(x, q, bias=None)         # x: [..., K] f16/bf16 -> [..., N]
    w2 = vstack.fp4.dequantize(q, torch.bfloat16)

The work is done by libvstack_kernels.so (quant/, C API in vstack/fp4.h); the
three ops are torch.library custom ops with fake implementations, so
torch.compile(fullgraph=True) traces them. Formats are documented bit by bit
in quant/FORMAT.md.
"""

import ctypes
from dataclasses import dataclass
from typing import Optional

import torch

from ._lib import check, lib

__all__ = ["FORMATS", "FP4Tensor", "quantize", "dequantize", "matmul", "mxfp4_range_flag"]

FORMATS = {"nvfp4": 0, "mxfp4": 1, "nf4": 2, "nf4_dq": 3}
LAYOUTS = {"linear": 0, "gemm": 1}
_BLOCK = {0: 16, 1: 32, 2: 64, 3: 64}
_CHUNK_SCALE_BYTES = {0: 4, 1: 2, 2: 4, 3: 1}
_DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}


class _Tensor(ctypes.Structure):
    _fields_ = [
        ("format", ctypes.c_int32),
        ("layout", ctypes.c_int32),
        ("rows", ctypes.c_int64),
        ("cols", ctypes.c_int64),
        ("codes", ctypes.c_void_p),
        ("scales", ctypes.c_void_p),
        ("scale2", ctypes.c_void_p),
    ]


def _clib():
    l = lib()
    if not getattr(l, "_vstack_fp4_ready", False):
        T = ctypes.POINTER(_Tensor)
        vp, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
        l.vstack_fp4_quantize.argtypes = [vp, i32, T, vp]
        l.vstack_fp4_dequantize.argtypes = [T, vp, i32, vp]
        l.vstack_fp4_matmul.argtypes = [vp, i32, i64, T, vp, vp, vp]
        l.vstack_fp4_matmul_config.argtypes = [i64, i64, i64, i32]
        for f in (l.vstack_fp4_quantize, l.vstack_fp4_dequantize, l.vstack_fp4_matmul, l.vstack_fp4_matmul_config):
            f.restype = ctypes.c_int
        l._vstack_fp4_ready = True
    return l


def _fmt_id(fmt) -> int:
    if isinstance(fmt, int) and fmt in _BLOCK:
        return fmt
    if fmt not in FORMATS:
        raise ValueError(f"vstack.fp4: unknown format {fmt!r}; expected one of {sorted(FORMATS)}")
    return FORMATS[fmt]


def _sizes(fmt: int, layout: int, rows, cols):
    """Buffer sizes, as quant/layout.hpp sizes() (plain arithmetic: works on SymInts)."""
    n = rows * cols
    blocks = n // _BLOCK[fmt]
    npad = (rows + 15) // 16 * 16
    if layout == 0:
        codes = n // 2
        scales = blocks * (4 if fmt == 2 else 1)
    else:  # 16-row tiles: rows padded to a multiple of 16
        codes = npad * cols // 2
        scales = (cols // 64) * npad * _CHUNK_SCALE_BYTES[fmt]
    # NVFP4: the tensor scale and the range flag; MXFP4: the range flag
    scale2 = 2 if fmt == 0 else 1 if fmt == 1 else ((blocks + 255) // 256 if fmt == 3 else 0)
    return codes, scales, scale2


def _rows_cols(x: torch.Tensor):
    if x.dim() == 2:
        return x.shape[0], x.shape[1]
    return 1, x.numel()


def _stream(dev: torch.device) -> int:
    return torch.cuda.current_stream(dev).cuda_stream


def _desc(fmt, layout, rows, cols, codes, scales, scale2) -> _Tensor:
    return _Tensor(fmt, layout, rows, cols, codes.data_ptr(), scales.data_ptr(),
                   scale2.data_ptr() if scale2.numel() else None)


def _check_cuda(t: torch.Tensor, what: str):
    if not t.is_cuda:
        raise ValueError(f"vstack.fp4.{what}: tensors must be on a CUDA device (got {t.device})")


# ---- custom ops --------------------------------------------------------------

@torch.library.custom_op("vstack::fp4_quantize", mutates_args=())
def _quantize_op(x: torch.Tensor, fmt: int, layout: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    _check_cuda(x, "quantize")
    if x.dtype not in _DTYPES:
        raise TypeError(f"vstack.fp4.quantize: dtype {x.dtype} not supported (float32, float16, bfloat16)")
    x = x.contiguous()
    rows, cols = _rows_cols(x)
    cb, sb, s2 = _sizes(fmt, layout, rows, cols)
    codes = torch.empty(cb, dtype=torch.uint8, device=x.device)
    scales = torch.empty(sb, dtype=torch.uint8, device=x.device)
    scale2 = torch.empty(s2, dtype=torch.float32, device=x.device)
    d = _desc(fmt, layout, rows, cols, codes, scales, scale2)
    with torch.cuda.device(x.device):
        check(_clib().vstack_fp4_quantize(x.data_ptr(), _DTYPES[x.dtype], ctypes.byref(d), _stream(x.device)),
              "vstack.fp4.quantize")
    return codes, scales, scale2


@_quantize_op.register_fake
def _(x, fmt, layout):
    rows, cols = _rows_cols(x)
    cb, sb, s2 = _sizes(fmt, layout, rows, cols)
    return (x.new_empty(cb, dtype=torch.uint8), x.new_empty(sb, dtype=torch.uint8),
            x.new_empty(s2, dtype=torch.float32))


@torch.library.custom_op("vstack::fp4_dequantize", mutates_args=())
def _dequantize_op(codes: torch.Tensor, scales: torch.Tensor, scale2: torch.Tensor, fmt: int, layout: int,
                   rows: int, cols: int, dtype: torch.dtype) -> torch.Tensor:
    _check_cuda(codes, "dequantize")
    if dtype not in _DTYPES:
        raise TypeError(f"vstack.fp4.dequantize: dtype {dtype} not supported")
    y = torch.empty(rows, cols, dtype=dtype, device=codes.device)
    d = _desc(fmt, layout, rows, cols, codes, scales, scale2)
    with torch.cuda.device(codes.device):
        check(_clib().vstack_fp4_dequantize(ctypes.byref(d), y.data_ptr(), _DTYPES[dtype], _stream(codes.device)),
              "vstack.fp4.dequantize")
    return y


@_dequantize_op.register_fake
def _(codes, scales, scale2, fmt, layout, rows, cols, dtype):
    return codes.new_empty(rows, cols, dtype=dtype)


@torch.library.custom_op("vstack::fp4_matmul", mutates_args=())
def _matmul_op(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, scale2: torch.Tensor, fmt: int,
               n: int, k: int, bias: Optional[torch.Tensor]) -> torch.Tensor:
    _check_cuda(x, "matmul")
    if x.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"vstack.fp4.matmul: x must be float16 or bfloat16 (got {x.dtype})")
    if x.shape[-1] != k:
        raise ValueError(f"vstack.fp4.matmul: x has {x.shape[-1]} features, the weight expects {k}")
    if codes.device != x.device:
        raise ValueError(f"vstack.fp4.matmul: x on {x.device}, weight on {codes.device}")
    if fmt == FORMATS["nvfp4"] and scale2.numel() != 2:
        raise ValueError(f"vstack.fp4.matmul: an NVFP4 weight's scale2 holds 2 floats, the tensor scale and the range "
                         f"flag (got {scale2.numel()}; nvfp4_range_flag makes the flag)")
    if bias is not None:
        if bias.shape != (n,) or bias.dtype != x.dtype or bias.device != x.device:
            raise ValueError(f"vstack.fp4.matmul: bias must be [{n}] {x.dtype} on {x.device}")
        bias = bias.contiguous()
    x2 = x.reshape(-1, k).contiguous()
    m = x2.shape[0]
    y = torch.empty(*x.shape[:-1], n, dtype=x.dtype, device=x.device)
    d = _desc(fmt, LAYOUTS["gemm"], n, k, codes, scales, scale2)
    with torch.cuda.device(x.device):
        check(_clib().vstack_fp4_matmul(x2.data_ptr(), _DTYPES[x.dtype], m, ctypes.byref(d),
                                        bias.data_ptr() if bias is not None else None, y.data_ptr(),
                                        _stream(x.device)), "vstack.fp4.matmul")
    return y


@_matmul_op.register_fake
def _(x, codes, scales, scale2, fmt, n, k, bias):
    return x.new_empty(*x.shape[:-1], n)


# ---- Python API -------------------------------------------------------------

@dataclass
class FP4Tensor:
    """A quantised tensor: codes, scales, scale2 (device tensors) plus format, layout, shape.

    scale2 is NVFP4's tensor scale and range flag, NF4_DQ's group scales, MXFP4's range flag (quant/FORMAT.md:
    quantize writes the flags; matmul trusts them, so after changing codes or scales by hand rewrite them
    (nvfp4_range_flag, mxfp4_range_flag), or write NVFP4's as 0 and pass MXFP4 an empty scale2) and empty for
    NF4."""

    codes: torch.Tensor
    scales: torch.Tensor
    scale2: torch.Tensor
    fmt: str
    layout: str
    shape: tuple

    @property
    def fmt_id(self) -> int:
        return FORMATS[self.fmt]

    @property
    def nbytes(self) -> int:
        return self.codes.numel() + self.scales.numel() + 4 * self.scale2.numel()

    def dequantize(self, dtype=torch.bfloat16) -> torch.Tensor:
        return dequantize(self, dtype)


def quantize(t: torch.Tensor, fmt: str = "nvfp4", layout: Optional[str] = None) -> FP4Tensor:
    """Quantise t (round to nearest). layout: "gemm" (default for 2-D tensors with
    t.shape[1] % 64 == 0; needed by matmul) or "linear"."""
    f = _fmt_id(fmt)
    t = t.detach()  # quantisation is not differentiable
    rows, cols = _rows_cols(t)
    if layout is None:
        layout = "gemm" if t.dim() == 2 and cols % 64 == 0 else "linear"
    if layout not in LAYOUTS:
        raise ValueError(f"vstack.fp4.quantize: unknown layout {layout!r}")
    if layout == "gemm" and (t.dim() != 2 or cols % 64):
        raise ValueError(f"vstack.fp4.quantize: the GEMM layout needs a 2-D tensor with a multiple of 64 columns, "
                         f"got {tuple(t.shape)}")
    if (rows * cols) % 64:
        raise ValueError(f"vstack.fp4.quantize: the GPU kernels need numel % 64 == 0, got {tuple(t.shape)}")
    codes, scales, scale2 = torch.ops.vstack.fp4_quantize(t, f, LAYOUTS[layout])
    name = [k for k, v in FORMATS.items() if v == f][0]
    return FP4Tensor(codes, scales, scale2, name, layout, tuple(t.shape))


def dequantize(q: FP4Tensor, dtype=torch.bfloat16) -> torch.Tensor:
    rows, cols = (q.shape[0], q.shape[1]) if len(q.shape) == 2 else (1, int(torch.Size(q.shape).numel()))
    y = torch.ops.vstack.fp4_dequantize(q.codes, q.scales, q.scale2, q.fmt_id, LAYOUTS[q.layout], rows, cols, dtype)
    return y.reshape(q.shape)


def matmul(x: torch.Tensor, q: FP4Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y = x @ W.T (+ bias) with W = q ([N, K], GEMM layout); x [..., K] float16/bfloat16."""
    if q.layout != "gemm" or len(q.shape) != 2:
        raise ValueError("vstack.fp4.matmul: the weight must be a 2-D FP4Tensor in the GEMM layout")
    n, k = q.shape
    return torch.ops.vstack.fp4_matmul(x, q.codes, q.scales, q.scale2, q.fmt_id, n, k, bias)


def nvfp4_range_flag(scales: torch.Tensor) -> torch.Tensor:
    """NVFP4's range flag (scale2[1], quant/FORMAT.md) from the scale bytes: [1.0] where every byte is plain
    (0..0x7E: not negative, not NaN; quantize gives every finite block one), else [0.0]. It is exact, padding rows
    included (their bytes are 0). For scales changed by hand, and checkpoints saved with the tensor scale alone."""
    if scales.dtype != torch.uint8:
        raise ValueError(f"vstack.fp4.nvfp4_range_flag: expected uint8 scale bytes, got {scales.dtype}")
    plain = scales.numel() == 0 or scales.max().item() < 0x7F
    return torch.full((1,), 1.0 if plain else 0.0, dtype=torch.float32, device=scales.device)


def mxfp4_range_flag(scales: torch.Tensor, rows: int, cols: int, layout: str = "gemm") -> torch.Tensor:
    """MXFP4's range flag (scale2, quant/FORMAT.md) from the scale bytes alone: [2.0] where every block's
    byte is in 114..140, [1.0] where every byte is in 64..191, else [0.0]. quantize also counts blocks of
    zero codes as folding whatever their byte, so this may be lower than what it wrote, never higher: a
    lower flag only costs speed. For scales changed by hand, and checkpoints saved without a flag.
    scales: the uint8 scale bytes of a rows x cols tensor in `layout` (GEMM padding rows are skipped)."""
    if layout not in LAYOUTS:
        raise ValueError(f"vstack.fp4.mxfp4_range_flag: unknown layout {layout!r}")
    _, sb, _ = _sizes(FORMATS["mxfp4"], LAYOUTS[layout], rows, cols)
    if scales.dtype != torch.uint8 or scales.numel() != sb:
        raise ValueError(f"vstack.fp4.mxfp4_range_flag: expected {sb} uint8 scale bytes for {rows}x{cols} "
                         f"({layout}), got {scales.numel()} of {scales.dtype}")
    b = scales.reshape(-1)
    if layout == "gemm" and rows % 16:  # [tile][chunk][slot][2 blocks]; slot s holds row (s >> 1) + 8 (s & 1)
        tiles = (rows + 15) // 16
        slot = torch.arange(16, device=b.device)
        row = torch.arange(tiles, device=b.device)[:, None] * 16 + (slot >> 1) + 8 * (slot & 1)
        b = b.view(tiles, cols // 64, 16, 2).permute(0, 2, 1, 3)[row < rows]
    level = 2.0  # no blocks: nothing to lower it
    if b.numel():
        lo, hi = b.min().item(), b.max().item()
        level = 2.0 if 114 <= lo and hi <= 140 else 1.0 if 64 <= lo and hi <= 191 else 0.0
    return torch.full((1,), level, dtype=torch.float32, device=scales.device)
