#!/usr/bin/env bash
# FP4 GPU tests: the kernels vs the CPU reference (C++), then the torch ops (Python, if torch is there).
# Usage: tests/gpu/quant/run.sh BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${1:?usage: run.sh BUILD_DIR}
bin="$build/tests/quant/fp4_gpu_tests"
[ -x "$bin" ] || { echo "missing $bin (configure with -Dkernels=true and build)" >&2; exit 1; }
export LD_LIBRARY_PATH="$build/kernels:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
status=0
"$bin" --durations yes || status=1
# every decode plan (S x T, and for S > 1 clusters or the split-K workspace), forced: the heuristic
# picks only some of them on this device (a forced plan is the register-load kernel's, never the ring's)
plans=0
for s in 1 2 4 8; do
  for t in 1 2 4 8; do
    for w in 0 1; do
      [ $s = 1 ] && [ $w = 1 ] && continue
      plans=$((plans + 1))
      VSTACK_GEMV_SPLIT=$s VSTACK_GEMV_TILES=$t VSTACK_GEMV_WS=$w "$bin" "[gemv-plans]" > /tmp/vstack-gemv-plan.log 2>&1 ||
        { echo "decode plan S$s T$t WS$w FAILED:"; tail -30 /tmp/vstack-gemv-plan.log; status=1; }
    done
  done
done
[ $status -eq 0 ] && echo "fp4_gpu_tests: all $plans forced decode plans pass"
# the ring kernel (Note [Ring kernel]) forced on (an error where the device cannot run it), then the
# register-load kernel's own plans where the ring kernel would take the shapes
for e in 1 0; do
  VSTACK_GEMV_RING=$e "$bin" "[gemv-plans]" > /tmp/vstack-gemv-plan.log 2>&1 ||
    { echo "decode plans with VSTACK_GEMV_RING=$e FAILED:"; tail -30 /tmp/vstack-gemv-plan.log; status=1; }
done
[ $status -eq 0 ] && echo "fp4_gpu_tests: decode plans with the ring kernel forced on and off pass"
# the ring kernel with x streamed in its stages (Note [Streamed x]), G tiles per row block forced
# (where G's layout fits: M = 16 does not at G = 1, and takes the launcher's G)
for g in 1 2 4 8; do
  VSTACK_GEMV_RING=1 VSTACK_GEMV_RING_G=$g "$bin" "[gemv-plans]" > /tmp/vstack-gemv-plan.log 2>&1 ||
    { echo "decode plans with the ring's streamed x at G=$g FAILED:"; tail -30 /tmp/vstack-gemv-plan.log; status=1; }
done
[ $status -eq 0 ] && echo "fp4_gpu_tests: decode plans with the ring's streamed x at G = 1, 2, 4, 8 pass"
# the wide row blocks (Note [Wide row blocks]): forced on with the ring (an error where an instance
# applies and this device cannot run it), then off (the same shapes on the G plans)
for e in 1 0; do
  VSTACK_GEMV_RING=1 VSTACK_GEMV_RING_WIDE=$e "$bin" "[gemv-wide]" > /tmp/vstack-gemv-wide.log 2>&1 ||
    { echo "wide row blocks with VSTACK_GEMV_RING_WIDE=$e FAILED:"; tail -30 /tmp/vstack-gemv-wide.log; status=1; }
done
[ $status -eq 0 ] && echo "fp4_gpu_tests: wide row blocks forced on and off pass"
# the wgmma GEMM configs (5..8: wg256, wg128, wg128n, wg64n), each with a K split forced (Note [K
# split]: 3 and 8 slices; the unsplit configs run in the cases above); where the device has no wgmma
# the mma.sync configs run instead
splits=0
for c in 5 6 7 8; do
  for k in 3 8; do
    splits=$((splits + 1))
    VSTACK_FP4_GEMM_CONFIG=$c VSTACK_FP4_GEMM_KSPLIT=$k "$bin" "[gemm-ksplit]" > /tmp/vstack-gemm-ksplit.log 2>&1 ||
      { echo "wgmma config $c K split $k FAILED:"; tail -30 /tmp/vstack-gemm-ksplit.log; status=1; }
  done
done
[ $status -eq 0 ] && echo "fp4_gpu_tests: all $splits forced wgmma configs x K splits pass"
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  VSTACK_KERNELS_LIB="$build/kernels/libvstack_kernels.so" PYTHONPATH="$root/python" \
    python3 "$here/test_fp4_torch.py" || status=1
else
  echo "torch with CUDA not found: skipped test_fp4_torch.py"
fi
exit $status
