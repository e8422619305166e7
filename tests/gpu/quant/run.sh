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
# picks only some of them on this device
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
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  VSTACK_KERNELS_LIB="$build/kernels/libvstack_kernels.so" PYTHONPATH="$root/python" \
    python3 "$here/test_fp4_torch.py" || status=1
else
  echo "torch with CUDA not found: skipped test_fp4_torch.py"
fi
exit $status
