#!/usr/bin/env bash
# Pager benchmarks (issue 2, Benchmarks). Usage:
#   bench/pager/run.sh BUILD_DIR
# 1. migration.cu: copy-engine bandwidth H2D / D2H / both, whole and in 32 MiB
#    pieces (natively: the baseline for the pager's migration GB/s);
# 2. launch_latency.cu: host cost per empty-kernel launch, 0 and 8 pointer
#    arguments: native, under the shim with VSTACK_DISABLE=1 (interposition
#    only) and under the shim (everything resident), alternated VSTACK_BENCH_REPS (5) times;
# 3. step_time.py: train_gpt.py natively and with the GPU tier at 1, 1/2, 1/4
#    of its native peak (step time, bytes moved, transfer bound, stalls).
# Prints a table of everything at the end. Record results in bench/RESULTS.md.
#
# Knobs: VSTACK_BENCH_STEPS (30), VSTACK_BENCH_MODE (eager|compile|cuda-graphs),
#   VSTACK_BENCH_GPT_ARGS (extra train_gpt.py args), VSTACK_BENCH_REPS (5),
#   VSTACK_BENCH_ONLY (subset of: migration launch step; default all),
#   VSTACK_BENCH_LOGDIR (keep logs there), VSTACK_BENCH_NATIVE=1 (native runs only).
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 64
fi
build=$(cd "$1" && pwd)
native_only=${VSTACK_BENCH_NATIVE:-0}
steps=${VSTACK_BENCH_STEPS:-30}
mode=${VSTACK_BENCH_MODE:-eager}
reps=${VSTACK_BENCH_REPS:-5}
only=" ${VSTACK_BENCH_ONLY:-migration launch step} "
work=${VSTACK_BENCH_LOGDIR:-$(mktemp -d /tmp/vstack-bench-pager.XXXXXX)}
mkdir -p "$work"
runner=$build/tools/vstack-run
bin=$build/bench-pager
mkdir -p "$bin"
want() { [[ "$only" == *" $1 "* ]]; }
if [ "$native_only" != 1 ] && [ ! -x "$runner" ]; then
  echo "missing $runner: build with -Dpager=true (or VSTACK_BENCH_NATIVE=1 for the native half)" >&2
  exit 1
fi
device=$(nvidia-smi -i 0 --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)
echo "bench/pager: $device, $(date -u '+%F %H:%M UTC'), logs in $work"

build_cu() {
  local src=$here/$1.cu out=$bin/$1
  if [ -x "$out" ] && [ ! "$src" -nt "$out" ]; then return 0; fi
  command -v nvcc >/dev/null || export PATH=$PATH:/usr/local/cuda/bin
  nvcc -O2 -std=c++17 -gencode arch=compute_80,code=sm_80 -gencode 'arch=compute_90,code=[sm_90,compute_90]' \
    -o "$out" "$src"
}
status=0

# --- 1. copy-engine bandwidth ------------------------------------------------------
if want migration || want step; then
  build_cu migration || exit 1
  "$bin/migration" --mib 1024 --page-mib 32 --reps 10 | tee "$work/migration.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  python3 - "$work/migration.log" "$work/migration.json" <<'EOF'
import json, sys
d = {}
for line in open(sys.argv[1]):
    if line.startswith("migration "):
        kv = dict(x.split("=", 1) for x in line.split()[1:])
        d[kv["case"]] = float(kv["gbps"])
json.dump(d, open(sys.argv[2], "w"), indent=1)
EOF
fi

# --- 2. launch latency ------------------------------------------------------------------
if want launch; then
  build_cu launch_latency || exit 1
  cat >"$work/launch.json" <<EOF
{"page_mb": 32,
 "tiers": [{"kind": "gpu", "device": 0, "capacity_gb": 8}, {"kind": "host", "numa_node": 0, "capacity_gb": 8}],
 "policy": {"eviction": "lru"},
 "stats": {"signal": "SIGUSR1", "path": "$work/launch-stats-%p.json"}}
EOF
  for r in $(seq 1 "$reps"); do
    "$bin/launch_latency" | sed "s/^/native /" >>"$work/launch.log" || status=1
    if [ "$native_only" != 1 ]; then
      VSTACK_DISABLE=1 "$runner" --config "$work/launch.json" -- "$bin/launch_latency" | sed "s/^/passthrough /" \
        >>"$work/launch.log" || status=1
      "$runner" --config "$work/launch.json" -- "$bin/launch_latency" | sed "s/^/shim /" >>"$work/launch.log" || status=1
    fi
  done
  cat "$work/launch.log"
fi

# --- 3. step time ---------------------------------------------------------------------------
if want step; then
  extra=()
  [ "$native_only" = 1 ] && extra+=(--native-only)
  python3 "$here/step_time.py" "$build" --steps "$steps" --mode "$mode" --migration "$work/migration.json" \
    --gpt-args "${VSTACK_BENCH_GPT_ARGS:-}" --workdir "$work/step" "${extra[@]}" | tee "$work/step.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi

# --- table ---------------------------------------------------------------------------------------
echo
echo "=== bench/pager summary: $device, $(date -u +%F)"
if [ -f "$work/migration.json" ]; then
  python3 - "$work/migration.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print("copy engine (pinned, cudaMemcpyAsync), GB/s: " + ", ".join(f"{k} {v:.1f}" for k, v in d.items()))
EOF
fi
if [ -f "$work/launch.log" ]; then
  python3 - "$work/launch.log" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) < 3 or p[1] != "launch_latency":
        continue
    kv = dict(x.split("=", 1) for x in p[2:])
    runs.setdefault((p[0], kv["args"]), []).append(float(kv["median_us"]))
print("launch cost, us per launch (median over runs of the per-run medians):")
print(f"{'args':>5} {'native':>8} {'passthru':>9} {'shim':>8} {'added':>8}  (target: added < 1 us)")
for args in ("0", "8"):
    m = {k: statistics.median(runs[(k, args)]) for k in ("native", "passthrough", "shim") if (k, args) in runs}
    add = m["shim"] - m["native"] if "shim" in m and "native" in m else None
    f = lambda v: f"{v:.3f}" if v is not None else "-"
    print(f"{args:>5} {f(m.get('native')):>8} {f(m.get('passthrough')):>9} {f(m.get('shim')):>8} {f(add):>8}")
EOF
fi
if [ -f "$work/step.log" ]; then
  sed -n '/^step time,/,$p' "$work/step.log"
fi
exit $status
