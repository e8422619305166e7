#!/usr/bin/env bash
# GPU check of kernels/wgmma.cuh (needs an sm_90 GPU and a -Dkernels=true build).
# Usage: tests/gpu/wgmma/run.sh BUILD_DIR
set -u
build=${1:?usage: run.sh BUILD_DIR}
bin="$build/tests/wgmma/wgmma_smoke"
[ -x "$bin" ] || bin="$build/wgmma/wgmma_smoke"
# wgmma is sm_90a code: builds for another target (meson option sm) do not have the test
sm=$(python3 -c "import json, sys; print(next(o['value'] for o in json.load(open(sys.argv[1])) if o['name'] == 'sm'))" \
  "$build/meson-info/intro-buildoptions.json" 2>/dev/null)
if [ ! -x "$bin" ] && [ -n "$sm" ] && [ "$sm" != 90a ]; then
  echo "wgmma_smoke: not built (sm = $sm, not 90a): skipped"; exit 0
fi
[ -x "$bin" ] || { echo "missing $build/tests/wgmma/wgmma_smoke (configure with -Dkernels=true and build)" >&2; exit 1; }
"$bin"
