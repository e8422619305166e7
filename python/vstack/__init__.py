"""vstack: framework bindings for libvstack_kernels.so (FP4 quantisation, flash attention).

The kernels are reached through ctypes (see _lib.py) and exposed as
torch.library custom ops in the submodules.
"""

__all__ = ["fp4", "attn", "nn"]


def __getattr__(name):
    # Submodules import torch; load them on first use so `import vstack` is cheap.
    if name in __all__:
        import importlib

        return importlib.import_module(f"vstack.{name}")
    raise AttributeError(name)
