#!/usr/bin/env bash
# Runs every GPU test on a machine with a GPU: each tests/gpu/<area>/run.sh in turn.
# Usage: tests/gpu/run_all.sh [BUILD_DIR] [AREA...]   (default build dir: build)
# Prints one PASS/FAIL line per area and a summary; exit status 0 only if all passed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
shift || true
areas=("$@")
if [ ${#areas[@]} -eq 0 ]; then
  for d in "$here"/*/; do [ -x "$d/run.sh" ] && areas+=("$(basename "$d")"); done
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "tests/gpu: no NVIDIA GPU visible (nvidia-smi -L failed); these tests need one." >&2
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
pass=0 fail=0
for a in "${areas[@]}"; do
  echo "=== tests/gpu/$a"
  if "$here/$a/run.sh" "$build"; then echo "PASS $a"; pass=$((pass + 1)); else echo "FAIL $a"; fail=$((fail + 1)); fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
