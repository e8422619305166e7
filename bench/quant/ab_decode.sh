#!/usr/bin/env bash
# A/B of two builds of libvstack_kernels.so on a GPU machine, in one call: first every decode-regime y of the
# lab must be bit-identical to the base's (tests/gpu/quant/matmul_digest.py: the wide instances' shapes, all
# formats, bf16 and f16, M = 1..16, each also checked against an fp32 product), then bench/quant/rounds.sh runs
# the decode bench of both in rotated rounds (base lab, lab base, base lab, ...) for bf16 and f16 x and prints
# each cell's ratio lab / base with the per-round range.
#
# Usage (repository root, the vstack package under python/):
#   bench/quant/ab_decode.sh BASE LAB OUTDIR [ROUNDS] [-- bench_fp4.py arguments]
# BASE, LAB: libvstack_kernels.so files (or .so.xz); ROUNDS: 3 by default; the bench arguments default to
# rounds.sh's (--m 1,4,8,9,16 on the four bar shapes). A bit-identity failure stops before the bench (a lab meant
# to change the arithmetic: set VSTACK_AB_NO_DIGEST=1 and rely on the reference check of the GPU suite instead).
# OUTDIR gets six files, so that it can be the device's $OUT (which returns at most 8): digest_base.json,
# digest_{base,lab}.log and rounds.sh's compare_{bf16,f16}.txt and runs.tar.gz. The libraries and the runs are
# written under VSTACK_AB_WORK (default: a new temporary folder), which is left in place.
# Cost, H200 (session 39): digests ~10 s a library, then rounds.sh's ~3 minutes for 3 rounds.
set -uo pipefail
[ $# -ge 3 ] || { sed -n 2,16p "$0" >&2; exit 2; }
base=$1 lab=$2 out=$3
shift 3
rounds=3
if [ $# -gt 0 ] && [ "$1" != "--" ]; then rounds=$1; shift; fi
[ "${1:-}" = "--" ] && shift
bench_args=("$@")
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
work=${VSTACK_AB_WORK:-$(mktemp -d /tmp/vstack-ab.XXXXXX)}
mkdir -p "$work"
lib() {  # lib SRC NAME: the library as $work/NAME/libvstack_kernels.so
  mkdir -p "$work/$2"
  case $1 in
    *.xz) python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
      "$1" "$work/$2/libvstack_kernels.so" ;;
    *) cp "$1" "$work/$2/libvstack_kernels.so" ;;
  esac || { echo "ab_decode: cannot read $1" >&2; exit 1; }
  echo "$work/$2/libvstack_kernels.so"
}
base_so=$(lib "$base" base) || exit 1
lab_so=$(lib "$lab" lab) || exit 1
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [ "${VSTACK_AB_NO_DIGEST:-0}" != 1 ]; then
  VSTACK_KERNELS_LIB=$base_so python3 "$root/tests/gpu/quant/matmul_digest.py" --out "$out/digest_base.json" \
    > "$out/digest_base.log" 2>&1
  echo "digests, base: $(tail -1 "$out/digest_base.log")"
  VSTACK_KERNELS_LIB=$lab_so python3 "$root/tests/gpu/quant/matmul_digest.py" --compare "$out/digest_base.json" \
    > "$out/digest_lab.log" 2>&1
  st=$?
  echo "digests, lab against base: $(tail -1 "$out/digest_lab.log")"
  if [ $st -ne 0 ]; then
    grep -m 20 -E "^(FAIL|MISMATCH)" "$out/digest_lab.log"
    echo "ab_decode: the lab's y differ from the base's; no bench" >&2
    exit 1
  fi
fi
VSTACK_AB_WORK=$work exec "$root/bench/quant/rounds.sh" "$out" "$rounds" base="$base_so" lab="$lab_so" -- \
  "${bench_args[@]}"
