#!/usr/bin/env bash
# The decode bench (bench_fp4.py --decode --no-convert) of several variants in rotated rounds within one call
# on a GPU machine, for bf16 and f16 x, then bench/quant/compare.py of them against the first. A variant is a
# library and, optionally, environment settings for its runs: two builds (bench/quant/ab_decode.sh runs this
# after its digest check), or one build under several values of a launch knob such as VSTACK_GEMV_RING_EARLY.
#
# Usage (repository root, the vstack package under python/):
#   bench/quant/rounds.sh OUTDIR ROUNDS NAME=LIB[,VAR=VALUE...] NAME=LIB[,...] ... [-- bench_fp4.py arguments]
# NAME: letters and digits (compare.py takes a file's variant up to its first '_'); LIB: a
# libvstack_kernels.so; VAR=VALUE: set for that variant's runs only (values without commas). Round r runs the
# variants shifted by r - 1 (A B C, B C A, C A B, ...; two: A B, B A, A B). ROUNDS: three or more (two proved
# unreliable, docs/NOTES.md session 17). The bench arguments default to --m 1,4,8,9,16 on bench_fp4.py's default
# shapes (the bar's).
# OUTDIR gets three files, so that it can be the device's $OUT (at most 8 come back): compare_bf16.txt,
# compare_f16.txt and runs.tar.gz (bf16/ and f16/: <NAME>_<round>.json and .log). The runs are written under
# VSTACK_AB_WORK/runs (default: a new temporary folder), which is left in place.
# Cost, H200 (session 40): a bench run of 80 cells ~15 s, so two variants x 3 rounds ~3 minutes.
set -uo pipefail
[ $# -ge 3 ] || { sed -n 2,17p "$0" >&2; exit 2; }
out=$1 rounds=$2
shift 2
names=() libs=() envs=()  # variant i: names[i], libs[i], envs[i] (VAR=VALUE words, space-separated)
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  spec=$1
  shift
  name=${spec%%=*} rest=${spec#*=}
  if [ "$name" = "$spec" ] || ! [[ $name =~ ^[A-Za-z0-9]+$ ]]; then
    echo "rounds: '$spec' is not NAME=LIB[,VAR=VALUE...] with NAME of letters and digits" >&2
    exit 2
  fi
  lib=${rest%%,*} vars=""
  [ "$lib" != "$rest" ] && vars=${rest#*,}
  [ -f "$lib" ] || { echo "rounds: variant $name: no library $lib" >&2; exit 2; }
  names+=("$name")
  libs+=("$lib")
  envs+=("${vars//,/ }")
done
[ "${1:-}" = "--" ] && shift
bench_args=("$@")
# shellcheck disable=SC2054  # the commas separate bench_fp4.py's list items
[ ${#bench_args[@]} -eq 0 ] && bench_args=(--m 1,4,8,9,16)
n=${#names[@]}
[ "$n" -ge 2 ] || { echo "rounds: two variants or more" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${VSTACK_AB_WORK:-$(mktemp -d /tmp/vstack-ab.XXXXXX)}
mkdir -p "$out" "$work/runs/bf16" "$work/runs/f16"
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
for r in $(seq 1 "$rounds"); do
  for j in $(seq 0 $((n - 1))); do
    i=$(((j + r - 1) % n))
    v=${names[$i]}
    for dt in bf16 f16; do
      log="$work/runs/$dt/${v}_$r.log"
      # shellcheck disable=SC2086  # envs[i]: VAR=VALUE words
      if ! env ${envs[$i]} VSTACK_KERNELS_LIB="${libs[$i]}" python3 "$root/bench/quant/bench_fp4.py" --no-convert \
        --decode --x-dtype "$dt" "${bench_args[@]}" --json "$work/runs/$dt/${v}_$r.json" > "$log" 2>&1; then
        echo "rounds: bench $v $dt round $r failed:" >&2
        tail -5 "$log" >&2
        tar -C "$work/runs" -czf "$out/runs.tar.gz" bf16 f16
        exit 1
      fi
    done
  done
done
tar -C "$work/runs" -czf "$out/runs.tar.gz" bf16 f16
order=$(IFS=,; echo "${names[*]}")
for dt in bf16 f16; do
  echo "== x $dt: against ${names[0]}"
  python3 "$root/bench/quant/compare.py" "$work/runs/$dt" --order "$order" | tee "$out/compare_$dt.txt"
done
