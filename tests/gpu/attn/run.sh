#!/usr/bin/env bash
# GPU tests of attn/: the C API matrix against the CPU reference, then the torch tests
# (gradients against fp32 torch, varlen, torch.compile, the SDPA helper, errors).
# Usage: tests/gpu/attn/run.sh BUILD_DIR [--quick]
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
shift || true
status=0
echo "--- attn_gpu_test (C API vs CPU reference)"
LD_LIBRARY_PATH="$build/kernels${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$build/tests/attn/attn_gpu_test" "$@" || status=1
echo "--- attn_bwd_compare (backward hd128: wgmma vs mma.sync kernel)"
"$build/tests/attn/attn_bwd_compare" --no-time || status=1
echo "--- test_attn_torch.py (torch)"
VSTACK_KERNELS_LIB="$build/kernels/libvstack_kernels.so" python3 "$here/test_attn_torch.py" "$@" || status=1
exit $status
