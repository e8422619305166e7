"""Locate and load libvstack_kernels.so with ctypes.

Search order: $VSTACK_KERNELS_LIB, then build*/kernels/ in the source tree
this package sits in, then the system loader path.
"""

import ctypes
import glob
import os

_lib = None


class VstackError(RuntimeError):
    """A vstack kernel returned a non-OK status."""


def _candidates():
    env = os.environ.get("VSTACK_KERNELS_LIB")
    if env:
        yield env
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for path in sorted(glob.glob(os.path.join(root, "build*", "kernels", "libvstack_kernels.so"))):
        yield path
    yield "libvstack_kernels.so"


def lib():
    """The loaded library (loaded once)."""
    global _lib
    if _lib is None:
        errors = []
        for path in _candidates():
            try:
                _lib = ctypes.CDLL(path)
                break
            except OSError as e:
                errors.append(f"{path}: {e}")
        if _lib is None:
            raise OSError("libvstack_kernels.so not found; set VSTACK_KERNELS_LIB. Tried:\n  " + "\n  ".join(errors))
        _lib.vstack_status_string.restype = ctypes.c_char_p
        _lib.vstack_status_string.argtypes = [ctypes.c_int]
        _lib.vstack_last_error.restype = ctypes.c_char_p
        _lib.vstack_last_error.argtypes = []
    return _lib


def check(status, what):
    """Raise VstackError naming `what` if status is not VSTACK_OK."""
    if status != 0:
        l = lib()
        raise VstackError(
            f"{what}: {l.vstack_status_string(status).decode()}: {l.vstack_last_error().decode()}"
        )
