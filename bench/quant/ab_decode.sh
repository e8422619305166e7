#!/usr/bin/env bash
# A/B of two builds of libvstack_kernels.so on a GPU machine, in one call: first every decode-regime y of the
# lab must be bit-identical to the base's (tests/gpu/quant/matmul_digest.py: the wide instances' shapes, all
# formats, bf16 and f16, M = 1..16, each also checked against an fp32 product), then the decode bench
# (bench_fp4.py --decode --no-convert) runs in rotated rounds (base lab, lab base, base lab, ...) for bf16 and
# f16 x, and bench/quant/compare.py prints each cell's ratio lab / base with the per-round range.
#
# Usage (repository root, the vstack package under python/):
#   bench/quant/ab_decode.sh BASE LAB OUTDIR [ROUNDS] [-- bench_fp4.py arguments]
# BASE, LAB: libvstack_kernels.so files (or .so.xz); ROUNDS: 3 by default (two proved unreliable, docs/NOTES.md
# session 17); the bench arguments default to --m 1,4,8,9,16 on the four bar shapes. A bit-identity failure
# stops before the bench (a lab meant to change the arithmetic: set VSTACK_AB_NO_DIGEST=1 and rely on the
# reference check of the GPU suite instead). OUTDIR gets six files, so that it can be the device's $OUT (which
# returns at most 8): digest_base.json, digest_{base,lab}.log, compare_{bf16,f16}.txt and runs.tar.gz, the
# bench's JSON files and logs (bf16/ and f16/, <variant>_<round>.json). The libraries and the runs themselves
# are written under VSTACK_AB_WORK (default: a new temporary folder), which is left in place.
# Cost, H200 (session 39): digests ~10 s a library, a bench run ~15 s, so 3 rounds ~3.5 minutes.
set -uo pipefail
[ $# -ge 3 ] || { sed -n 2,17p "$0" >&2; exit 2; }
base=$1 lab=$2 out=$3
shift 3
rounds=3
if [ $# -gt 0 ] && [ "$1" != "--" ]; then rounds=$1; shift; fi
[ "${1:-}" = "--" ] && shift
bench_args=("$@")
[ ${#bench_args[@]} -eq 0 ] && bench_args=(--m 1,4,8,9,16 --shapes 4096x4096,4096x14336,8192x8192,14336x4096)
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
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 0 ]; then order="lab base"; else order="base lab"; fi
  for v in $order; do
    so=$base_so
    [ "$v" = lab ] && so=$lab_so
    for dt in bf16 f16; do
      mkdir -p "$work/runs/$dt"
      if ! VSTACK_KERNELS_LIB=$so python3 "$root/bench/quant/bench_fp4.py" --no-convert --decode --x-dtype "$dt" \
        "${bench_args[@]}" --json "$work/runs/$dt/${v}_$r.json" > "$work/runs/$dt/${v}_$r.log" 2>&1; then
        echo "ab_decode: bench $v $dt round $r failed:" >&2
        tail -5 "$work/runs/$dt/${v}_$r.log" >&2
        tar -C "$work/runs" -czf "$out/runs.tar.gz" .
        exit 1
      fi
    done
  done
done
tar -C "$work/runs" -czf "$out/runs.tar.gz" bf16 f16
for dt in bf16 f16; do
  echo "== x $dt: lab / base"
  python3 "$root/bench/quant/compare.py" "$work/runs/$dt" --order base,lab | tee "$out/compare_$dt.txt"
done
