#!/usr/bin/env bash
# Builds vstack (everything: shim, pool, tools, kernels) in build/ and runs
# every CPU test: Catch2 suites, the shim end to end over tests/fakecuda, the
# tools, and the Python tests; compiles the kernels for sm_80 too (build-sm80/). No GPU needed (GPU
# tests: tests/gpu/run_all.sh).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH=$PATH:${CUDA_HOME:-/usr/local/cuda}/bin
build=${VSTACK_BUILD:-build}
if [ ! -f "$build/build.ninja" ]; then
  scripts/meson-setup.sh "$build" || exit 1
fi
meson compile -C "$build" || exit 1
status=0
meson test -C "$build" --print-errorlogs --num-processes 2 || status=1
# The kernels for the other GPU target, sm_80 (meson option sm): compiled only, no GPU here, so that
# the Ampere code paths (mma.sync only, no clusters, TMA or wgmma) keep building.
build80=${VSTACK_BUILD_SM80:-build-sm80}
if [ ! -f "$build80/build.ninja" ]; then
  scripts/meson-setup.sh "$build80" -Dsm=80 -Dpager=false >/dev/null || status=1
fi
if [ -f "$build80/build.ninja" ]; then
  echo "--- kernels for sm_80 (compile only)"
  ninja -C "$build80" kernels/libvstack_kernels.so tests/quant/fp4_gpu_tests tests/attn/attn_gpu_test || status=1
fi
if ls tests/python/test_*.py >/dev/null 2>&1; then
  python3 -m pytest -q tests/python || status=1
fi
exit $status
