"""Inference modules over the vstack kernels.

    lin = vstack.nn.FP4Linear.from_linear(torch_linear, fmt="nvfp4")
    vstack.nn.swap_linears(model, fmt="nvfp4")   # every nn.Linear -> FP4Linear, in place
"""

from typing import Callable, Optional

import torch

from . import fp4

__all__ = ["FP4Linear", "swap_linears"]


class FP4Linear(torch.nn.Module):
    """Drop-in for nn.Linear at inference: the weight is stored in an FP4 format
    (GEMM layout) and y = x W^T + b runs in the fused dequant-GEMM. x must be
    float16 or bfloat16 on the weight's device; no autograd."""

    def __init__(self, in_features: int, out_features: int, fmt: str = "nvfp4", bias: bool = True,
                 device=None, dtype=torch.bfloat16):
        super().__init__()
        if in_features % 64:
            raise ValueError(f"FP4Linear: in_features must be a multiple of 64 (got {in_features})")
        self.in_features, self.out_features, self.fmt = in_features, out_features, fmt
        f = fp4._fmt_id(fmt)
        cb, sb, s2 = fp4._sizes(f, fp4.LAYOUTS["gemm"], out_features, in_features)
        self.register_buffer("codes", torch.zeros(cb, dtype=torch.uint8, device=device))
        self.register_buffer("scales", torch.zeros(sb, dtype=torch.uint8, device=device))
        # NVFP4's tensor scale 1 and its range flag 1, MXFP4's range flag 1 (bf16): true of the zero codes and
        # scales (quant/FORMAT.md)
        self.register_buffer("scale2", torch.ones(s2, dtype=torch.float32, device=device))
        self.register_buffer("bias", torch.zeros(out_features, dtype=dtype, device=device) if bias else None)

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, fmt: str = "nvfp4") -> "FP4Linear":
        w = linear.weight.detach()
        if not w.is_cuda:
            raise ValueError("FP4Linear.from_linear: the Linear must be on a CUDA device")
        mod = cls(linear.in_features, linear.out_features, fmt, linear.bias is not None, w.device,
                  w.dtype if w.dtype in (torch.float16, torch.bfloat16) else torch.bfloat16)
        q = fp4.quantize(w, fmt, layout="gemm")
        mod.codes, mod.scales, mod.scale2 = q.codes, q.scales, q.scale2
        if linear.bias is not None:
            mod.bias = linear.bias.detach().to(mod.bias.dtype).clone()
        return mod

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # A state_dict saved before scale2 carried the range flag: MXFP4's scale2 is empty, NVFP4's holds the tensor
        # scale alone. Take the flag from the scale bytes (MXFP4: a lower bound of quantize's; NVFP4: exact), so
        # never a wrong product.
        key = prefix + "scale2"
        s2, sc = state_dict.get(key), state_dict.get(prefix + "scales")
        if self.fmt == "mxfp4" and s2 is not None and s2.numel() == 0 and sc is not None:
            state_dict[key] = fp4.mxfp4_range_flag(sc, self.out_features, self.in_features)
        if self.fmt == "nvfp4" and s2 is not None and s2.numel() == 1 and sc is not None:
            state_dict[key] = torch.cat([s2.reshape(1).float(), fp4.nvfp4_range_flag(sc).to(s2.device)])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def weight_fp4(self) -> fp4.FP4Tensor:
        return fp4.FP4Tensor(self.codes, self.scales, self.scale2, self.fmt, "gemm",
                             (self.out_features, self.in_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = self.bias
        if b is not None and b.dtype != x.dtype:
            b = b.to(x.dtype)
        return torch.ops.vstack.fp4_matmul(x, self.codes, self.scales, self.scale2, fp4.FORMATS[self.fmt],
                                           self.out_features, self.in_features, b)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, fmt={self.fmt}, " \
               f"bias={self.bias is not None}"


def swap_linears(module: torch.nn.Module, fmt: str = "nvfp4",
                 skip: Optional[Callable[[str, torch.nn.Linear], bool]] = None, prefix: str = "") -> torch.nn.Module:
    """Replace every nn.Linear in module (recursively, in place) by FP4Linear.from_linear;
    skip(name, linear) -> True keeps a layer in full precision."""
    for name, child in list(module.named_children()):
        full = f"{prefix}.{name}" if prefix else name
        if isinstance(child, torch.nn.Linear) and not (skip and skip(full, child)):
            setattr(module, name, FP4Linear.from_linear(child, fmt))
        else:
            swap_linears(child, fmt, skip, full)
    return module
