#!/usr/bin/env bash
# GPU check of kernels/wgmma.cuh (needs an sm_90 GPU and a -Dkernels=true build).
# Usage: tests/gpu/wgmma/run.sh BUILD_DIR
set -u
build=${1:?usage: run.sh BUILD_DIR}
bin="$build/tests/wgmma/wgmma_smoke"
[ -x "$bin" ] || bin="$build/wgmma/wgmma_smoke"
[ -x "$bin" ] || { echo "missing $build/tests/wgmma/wgmma_smoke (configure with -Dkernels=true and build)" >&2; exit 1; }
"$bin"
