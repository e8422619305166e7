#!/usr/bin/env bash
# GPU tests of the pager (issue 2, Tests -> GPU). Usage:
#   tests/gpu/pager/run.sh BUILD_DIR
# Uses BUILD_DIR/tools/vstack-run (which preloads BUILD_DIR/shim/libvstack.so),
# builds the CUDA test programs with nvcc into BUILD_DIR/gpu-tests-pager when
# they are missing or older than their sources, writes the configs it needs to
# a temp dir, prints a PASS/FAIL line per test and a table. Exit 0 only if all
# passed. What each test checks: README.md beside this file.
#
# Knobs (environment):
#   VSTACK_TEST_RESERVE_MB  GPU memory allowed above the GPU tier, as NVML sees
#                           the process from outside (context, module images,
#                           anything the documented reserve covers). Default 1024.
#   VSTACK_TEST_STEPS       training steps of (c)/(d) (default 50)
#   VSTACK_TEST_GPT_ARGS    extra train_gpt.py arguments (e.g. "--layers 4")
#   VSTACK_TEST_ONLY        subset of: a b c d-compile d-graphs (default all)
#   VSTACK_TEST_A_TIER_MB   GPU tier of (a) (default 2048; footprint 4x)
#   VSTACK_TEST_B_TIER_MB   GPU tier of (b) (default 1024)
#   VSTACK_TEST_PAGE_MB     page_mb of every config (default 32)
#   VSTACK_TEST_TIMEOUT     seconds per program run (default 1200)
#   VSTACK_TEST_LOGDIR      keep logs, configs, stats and NVML samples here
#   VSTACK_TEST_NATIVE=1    run every "paged" run natively too (checks the test
#                           programs and this script without the shim: losses
#                           must then match run to run; the tier and stats
#                           checks are reported n/a)
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 64
fi
build=$(cd "$1" && pwd)
native_only=${VSTACK_TEST_NATIVE:-0}
reserve_mb=${VSTACK_TEST_RESERVE_MB:-1024}
steps=${VSTACK_TEST_STEPS:-50}
gpt_args=${VSTACK_TEST_GPT_ARGS:-}
only=" ${VSTACK_TEST_ONLY:-a b c d-compile d-graphs} "
a_tier_mb=${VSTACK_TEST_A_TIER_MB:-2048}
b_tier_mb=${VSTACK_TEST_B_TIER_MB:-1024}
page_mb=${VSTACK_TEST_PAGE_MB:-32}
tmo=${VSTACK_TEST_TIMEOUT:-1200}
work=${VSTACK_TEST_LOGDIR:-$(mktemp -d /tmp/vstack-gpu-pager.XXXXXX)}
mkdir -p "$work"
runner=$build/tools/vstack-run
shim=$build/shim/libvstack.so
bin=$build/gpu-tests-pager
export CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONUNBUFFERED=1

names=() results=() details=()
record() {  # name PASS|FAIL detail
  names+=("$1"); results+=("$2"); details+=("$3")
  echo "$2 $1: $3"
}

echo "tests/gpu/pager: logs in $work"
if [ "$native_only" = 1 ]; then
  echo "VSTACK_TEST_NATIVE=1: every run is native (no shim); tier/stats checks are n/a"
elif [ ! -x "$runner" ] || [ ! -f "$shim" ]; then
  echo "missing $runner or $shim: build with -Dpager=true first" >&2
  echo "FAIL pager: no vstack-run/libvstack.so in $build"
  exit 1
fi

# --- build the CUDA programs ---------------------------------------------------
mkdir -p "$bin"
build_cu() {
  local src=$here/$1.cu out=$bin/$1
  if [ -x "$out" ] && [ ! "$src" -nt "$out" ] && [ ! "$here/common.cuh" -nt "$out" ] && [ ! "$here/../cuda_check.hpp" -nt "$out" ]; then return 0; fi
  command -v nvcc >/dev/null || export PATH=$PATH:/usr/local/cuda/bin
  nvcc -O2 -std=c++17 -gencode arch=compute_80,code=sm_80 -gencode 'arch=compute_90,code=[sm_90,compute_90]' \
    -o "$out" "$src" >"$work/build-$1.log" 2>&1 || { cat "$work/build-$1.log"; return 1; }
}

# --- helpers -------------------------------------------------------------------
# write_cfg FILE GPU_MIB HOST_MIB STATS_DIR [RULES_JSON]
write_cfg() {
  python3 - "$1" "$2" "$3" "$4" "$page_mb" "${5:-[]}" <<'EOF'
import json, sys
f, g, h, d, page = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5])
rules = json.loads(sys.argv[6])
cfg = {"page_mb": page, "rules": rules,
       "tiers": [{"kind": "gpu", "device": 0, "capacity_gb": g / 1024},
                 {"kind": "host", "numa_node": 0, "capacity_gb": h / 1024}],
       "policy": {"eviction": "lru"},
       "stats": {"signal": "SIGUSR1", "path": d + "/vstack-%p.json"},
       "log": {"level": "warn"}}
with open(f, "w") as out:
    json.dump(cfg, out, indent=1)
EOF
}

# paged CFG LOG cmd...: run under vstack-run (or natively with VSTACK_TEST_NATIVE=1)
paged() {
  local cfg=$1 log=$2
  shift 2
  if [ "$native_only" = 1 ]; then
    timeout "$tmo" "$@" >"$log" 2>&1
  else
    timeout "$tmo" "$runner" --config "$cfg" -- "$@" >"$log" 2>&1
  fi
}

poll_start() { python3 "$here/nvml_poll.py" "$1" & poll_pid=$!; sleep 0.5; }
poll_stop() { sleep 0.3; kill "$poll_pid" 2>/dev/null; wait "$poll_pid" 2>/dev/null; }

want() { [[ "$only" == *" $1 "* ]]; }

# --- (a) mixed allocations, 4x the GPU tier -------------------------------------
if want a; then
  if build_cu pager_stress; then
    fp=$((4 * a_tier_mb)); host=$(((2 * fp + 2048) / page_mb * page_mb))
    mkdir -p "$work/a-stats"
    write_cfg "$work/a.json" "$a_tier_mb" "$host" "$work/a-stats"
    if [ "$native_only" = 1 ]; then
      total=$(nvidia-smi -i 0 --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
      oom=$((2 * total * 1048576))  # natively: twice the device
    else
      oom=$(((a_tier_mb + host) * 1048576))  # all tiers together, on top of what is live
    fi
    paged "$work/a.json" "$work/a.log" "$bin/pager_stress" --footprint-mib "$fp" --rounds 8 --oom-bytes "$oom"
    rc=$?
    tail -n 3 "$work/a.log"
    verdict=$(grep -E '^pager_stress:' "$work/a.log" | tail -1)
    if [ "$native_only" = 1 ]; then st="stats n/a"; src=0; else
      st=$(python3 "$here/check.py" stats "$work/a-stats" --require-demotions --require-oom 2); src=$?; echo "$st"; fi
    if [ $rc -eq 0 ] && [ $src -eq 0 ]; then
      record a PASS "${fp} MiB in mixed allocations over a ${a_tier_mb} MiB GPU tier; ${verdict#pager_stress: }"
    else
      record a FAIL "exit $rc; ${verdict:-no verdict line}; $(echo "$st" | tail -1); log $work/a.log"
    fi
  else
    record a FAIL "nvcc build of pager_stress.cu failed"
  fi
fi

# --- (b) pointers stored in device memory ---------------------------------------
if want b; then
  if build_cu indirect; then
    mkdir -p "$work/b-stats"
    # The buffers are reached only through pointers in device memory, which the
    # scan cannot see: the config marks them opaque (Note [Undetected
    # references] in DESIGN.md), so they move only while the device is idle.
    # The pressure allocations (64 MiB) stay ordinary pages.
    write_cfg "$work/b.json" "$b_tier_mb" 8192 "$work/b-stats" \
      '[{"match": {"min_bytes": 50331648, "max_bytes": 50331648}, "action": "opaque"}]'
    paged "$work/b.json" "$work/b.log" "$bin/indirect" --pressure-mib $((2 * b_tier_mb)) --buffers 24 --buffer-mib 48
    rc=$?
    tail -n 2 "$work/b.log"
    verdict=$(grep -E '^indirect:' "$work/b.log" | tail -1)
    if [ "$native_only" = 1 ]; then st="stats n/a"; src=0; else
      st=$(python3 "$here/check.py" stats "$work/b-stats" --require-demotions); src=$?; echo "$st"; fi
    if [ $rc -eq 0 ] && [ $src -eq 0 ]; then
      record b PASS "${verdict#indirect: } (GPU tier ${b_tier_mb} MiB)"
    else
      record b FAIL "exit $rc; ${verdict:-no verdict line}; $(echo "$st" | tail -1); log $work/b.log"
    fi
  else
    record b FAIL "nvcc build of indirect.cu failed"
  fi
fi

# --- (c), (d) the training script: native, then paged at half its peak ----------
# gpt NAME [train_gpt.py flags]
gpt() {
  local name=$1
  shift
  local nat=$work/$name-native pg=$work/$name-paged
  poll_start "$nat.nvml"
  timeout "$tmo" python3 "$here/train_gpt.py" --steps "$steps" "$@" $gpt_args --out "$nat.json" >"$nat.log" 2>&1
  local rc=$?
  poll_stop
  if [ $rc -ne 0 ] || [ ! -f "$nat.json" ]; then
    tail -n 20 "$nat.log"
    record "$name" FAIL "native run failed (exit $rc), log $nat.log"
    return
  fi
  local peak_b peak_mb tier_mb host_mb pid
  peak_b=$(python3 "$here/check.py" field "$nat.json" max_memory_reserved)
  peak_mb=$((peak_b / 1048576))
  tier_mb=$(((peak_mb / 2) / page_mb * page_mb))
  host_mb=$(((2 * peak_mb + 4096) / page_mb * page_mb))
  pid=$(python3 "$here/check.py" field "$nat.json" pid)
  local nat_mem
  nat_mem=$(python3 "$here/check.py" memory "$nat.nvml" --pid "$pid")
  echo "$name native: median step $(python3 "$here/check.py" field "$nat.json" median_step_ms) ms," \
       "max_memory_reserved ${peak_mb} MiB; NVML $nat_mem"
  mkdir -p "$pg-stats"
  write_cfg "$pg.cfg.json" "$tier_mb" "$host_mb" "$pg-stats"
  poll_start "$pg.nvml"
  paged "$pg.cfg.json" "$pg.log" python3 "$here/train_gpt.py" --steps "$steps" "$@" $gpt_args --out "$pg.json"
  rc=$?
  poll_stop
  if [ $rc -ne 0 ] || [ ! -f "$pg.json" ]; then
    tail -n 20 "$pg.log"
    record "$name" FAIL "paged run (GPU tier ${tier_mb} MiB) failed (exit $rc), log $pg.log"
    return
  fi
  local cmp mem st crc mrc src=0
  cmp=$(python3 "$here/check.py" losses "$nat.json" "$pg.json"); crc=$?
  pid=$(python3 "$here/check.py" field "$pg.json" pid)
  if [ "$native_only" = 1 ]; then
    mem="$(python3 "$here/check.py" memory "$pg.nvml" --pid "$pid") (native: tier limit $((tier_mb + reserve_mb)) MiB n/a)"
    mrc=0; st="stats n/a"
  else
    mem=$(python3 "$here/check.py" memory "$pg.nvml" --pid "$pid" --limit-mib $((tier_mb + reserve_mb))); mrc=$?
    st=$(python3 "$here/check.py" stats "$pg-stats" --require-demotions); src=$?
    echo "$st"
  fi
  echo "$name paged (GPU tier ${tier_mb} MiB = half of ${peak_mb}): median step" \
       "$(python3 "$here/check.py" field "$pg.json" median_step_ms) ms; losses: $cmp; NVML: $mem"
  if [ $crc -eq 0 ] && [ $mrc -eq 0 ] && [ $src -eq 0 ]; then
    record "$name" PASS "$steps steps, tier ${tier_mb} MiB (native peak ${peak_mb}): $cmp; NVML $mem"
  else
    record "$name" FAIL "tier ${tier_mb} MiB: losses: $cmp; NVML: $mem; $(echo "$st" | tail -1)"
  fi
}

want c && gpt c
want d-compile && gpt d-compile --compile
want d-graphs && gpt d-graphs --cuda-graphs

# --- table ---------------------------------------------------------------------
echo
echo "tests/gpu/pager summary ($(date -u +%F), $(nvidia-smi -i 0 --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null))"
printf '%-10s %-5s %s\n' test result detail
fail=0
for i in "${!names[@]}"; do
  printf '%-10s %-5s %s\n' "${names[$i]}" "${results[$i]}" "${details[$i]}"
  [ "${results[$i]}" = PASS ] || fail=1
done
[ ${#names[@]} -gt 0 ] || { echo "no test selected"; exit 1; }
exit $fail
