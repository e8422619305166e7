#!/usr/bin/env bash
# Builds vstack (everything: shim, pool, tools, kernels) in build/ and runs
# every CPU test: Catch2 suites, the shim end to end over tests/fakecuda, the
# tools, and the Python tests. No GPU needed (GPU tests: tests/gpu/run_all.sh).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH=$PATH:${CUDA_HOME:-/usr/local/cuda}/bin
build=${VSTACK_BUILD:-build}
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" || exit 1
fi
meson compile -C "$build" || exit 1
status=0
meson test -C "$build" --print-errorlogs --num-processes 2 || status=1
if ls tests/python/test_*.py >/dev/null 2>&1; then
  python3 -m pytest -q tests/python || status=1
fi
exit $status
