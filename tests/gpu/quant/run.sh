#!/usr/bin/env bash
# FP4 GPU tests: the kernels vs the CPU reference (C++), then the torch ops (Python, if torch is there).
# Usage: tests/gpu/quant/run.sh BUILD_DIR
# The test binary runs once unforced and then once per forced setting below; those runs are independent
# processes and run VSTACK_TEST_JOBS at a time (default 4) on the one GPU: they check results, not time.
# Each run's log is kept under $VSTACK_TEST_LOGS (default a temporary folder); a failing run's tail is
# printed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${1:?usage: run.sh BUILD_DIR}
bin="$build/tests/quant/fp4_gpu_tests"
[ -x "$bin" ] || { echo "missing $bin (configure with -Dkernels=true and build)" >&2; exit 1; }
export LD_LIBRARY_PATH="$build/kernels:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
jobs_max=${VSTACK_TEST_JOBS:-4}
logs=${VSTACK_TEST_LOGS:-$(mktemp -d /tmp/vstack-fp4-gpu.XXXXXX)}
mkdir -p "$logs"
names=()  # run i: its label, its process (pids[i]) and its log (run$i.log)
pids=()
# run LABEL [VAR=VALUE...] -- [binary args...]: the binary in the background with those settings
run() {
  local label=$1
  shift
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
  local log="$logs/run${#names[@]}.log"
  env "${envs[@]}" "$bin" "$@" > "$log" 2>&1 &
  pids+=($!)
  names+=("$label")
}
# the whole binary, unforced (the heuristics' choices)
run "fp4_gpu_tests (unforced)" -- --durations yes
# every decode plan (S x T, and for S > 1 clusters or the split-K workspace), forced: the heuristic
# picks only some of them on this device (a forced plan is the register-load kernel's, never the ring's)
for s in 1 2 4 8; do
  for t in 1 2 4 8; do
    for w in 0 1; do
      [ $s = 1 ] && [ $w = 1 ] && continue
      run "decode plan S$s T$t WS$w" VSTACK_GEMV_SPLIT=$s VSTACK_GEMV_TILES=$t VSTACK_GEMV_WS=$w -- "[gemv-plans]"
    done
  done
done
# the ring kernel (Note [Ring kernel]) forced on (an error where the device cannot run it), then the
# register-load kernel's own plans where the ring kernel would take the shapes
for e in 1 0; do run "decode plans with VSTACK_GEMV_RING=$e" VSTACK_GEMV_RING=$e -- "[gemv-plans]"; done
# the ring kernel with x streamed in its stages (Note [Streamed x]), G tiles per row block forced
# (where G's layout fits: M = 16 does not at G = 1, and takes the launcher's G)
for g in 1 2 4 8; do
  run "decode plans with the ring's streamed x at G=$g" VSTACK_GEMV_RING=1 VSTACK_GEMV_RING_G=$g -- "[gemv-plans]"
done
# the wide row blocks (Note [Wide row blocks]): forced on with the ring (an error where an instance
# applies and this device cannot run it), then off (the same shapes on the G plans)
for e in 1 0; do
  run "wide row blocks with VSTACK_GEMV_RING_WIDE=$e" VSTACK_GEMV_RING=1 VSTACK_GEMV_RING_WIDE=$e -- "[gemv-wide]"
done
# and without packed columns (Note [Packed columns]): M <= 2 (NVFP4) and <= 4 (MXFP4) on the unpacked instances
run "wide row blocks with VSTACK_GEMV_PACK=0" VSTACK_GEMV_PACK=0 -- "[gemv-wide]"
# the wgmma GEMM configs (5..8: wg256, wg128, wg128n, wg64n), each with a K split forced (Note [K
# split]: 3 and 8 slices; the unsplit configs run in the cases above); where the device has no wgmma
# the mma.sync configs run instead
for c in 5 6 7 8; do
  for k in 3 8; do
    run "wgmma config $c K split $k" VSTACK_FP4_GEMM_CONFIG=$c VSTACK_FP4_GEMM_KSPLIT=$k -- "[gemm-ksplit]"
  done
done
status=0
passed=0
for i in "${!names[@]}"; do
  label=${names[$i]}
  if wait "${pids[$i]}"; then
    passed=$((passed + 1))
  else
    echo "$label FAILED:"
    tail -30 "$logs/run$i.log"
    status=1
  fi
done
grep -h -E "base seed|worst \|\|y|All tests passed" "$logs/run0.log"
echo "fp4_gpu_tests: $passed of ${#names[@]} runs passed (the unforced binary, 28 forced decode plans, the ring on /"
echo "  off, streamed x at G = 1, 2, 4, 8, the wide row blocks on / off and unpacked, 8 wgmma configs x K splits);"
echo "  logs in $logs"
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  VSTACK_KERNELS_LIB="$build/kernels/libvstack_kernels.so" PYTHONPATH="$root/python" \
    python3 "$here/test_fp4_torch.py" || status=1
  # every decode-regime instance width (GX 2..7), format, x dtype and M = 1..16 against an fp32 product
  echo "matmul_digest (decode regime against the fp32 product):"
  VSTACK_KERNELS_LIB="$build/kernels/libvstack_kernels.so" PYTHONPATH="$root/python" \
    python3 "$here/matmul_digest.py" || status=1
else
  echo "torch with CUDA not found: skipped test_fp4_torch.py"
fi
exit $status
