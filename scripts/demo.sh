#!/usr/bin/env bash
# The vstack demo: build, then run a CUDA program whose GPU footprint is 3x the
# configured GPU tier under vstack-run, verify every byte, print the tier stats.
#   scripts/demo.sh            (after scripts/setup.sh installed the build deps)
# Installs nothing. Exit status: 0 demo correct; 1 no GPU, build failure or
# wrong bytes.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH=$PATH:/usr/local/cuda/bin
# VSTACK_BUILD: build dir (default build); VSTACK_DEMO_NO_BUILD=1 uses it as it is
# (a prebuilt dir carried to a GPU machine that lacks the build dependencies).
build=${VSTACK_BUILD:-build}

say() { echo "vstack demo: $*"; }

# --- build (meson, build dir `build`) -------------------------------------------
if [ "${VSTACK_DEMO_NO_BUILD:-0}" != 1 ]; then
  if [ ! -f "$build/build.ninja" ]; then
    scripts/meson-setup.sh "$build" || { say "meson setup failed (did scripts/setup.sh run?)"; exit 1; }
  fi
  meson compile -C "$build" || { say "build failed"; exit 1; }
fi

# --- a GPU? ------------------------------------------------------------------------
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "vstack demo: no NVIDIA GPU found on this machine; the demo needs one (the tests run without: scripts/test.sh)"
  exit 1
fi
nvidia-smi -L | head -1

runner=$build/tools/vstack-run
if [ ! -x "$runner" ]; then
  say "$runner was not built (configure with -Dpager=true)"
  exit 1
fi

# --- the demo program: from meson when it built it, else nvcc directly -----------
demo=$build/demo/vstack_demo
if [ ! -x "$demo" ]; then
  demo=$build/demo-nvcc/vstack_demo
  if [ ! -x "$demo" ] || [ demo/vstack_demo.cu -nt "$demo" ]; then
    mkdir -p "$build/demo-nvcc"
    nvcc -O2 -gencode arch=compute_80,code=sm_80 -gencode 'arch=compute_90,code=[sm_90,compute_90]' \
      -o "$demo" demo/vstack_demo.cu || { say "nvcc could not build demo/vstack_demo.cu"; exit 1; }
  fi
fi

# --- the config: configs/demo.json, else one of our own ------------------------------
tmp=$(mktemp -d /tmp/vstack-demo.XXXXXX)
config=configs/demo.json
if [ ! -f "$config" ]; then
  config=$tmp/demo.json
  cat >"$config" <<EOF
{
  "page_mb": 32,
  "tiers": [
    {"kind": "gpu", "device": 0, "capacity_gb": 4},
    {"kind": "host", "numa_node": 0, "capacity_gb": 16}
  ],
  "policy": {"eviction": "lru"},
  "stats": {"signal": "SIGUSR1"}
}
EOF
  say "configs/demo.json not found; using $config"
fi
# The GPU tier's size, from the config.
tier_mib=$(python3 - "$config" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
gpu = [t for t in c.get("tiers", []) if t.get("kind") == "gpu"]
cap = gpu[0].get("capacity_gb") if gpu else None
if not isinstance(cap, (int, float)) or cap <= 0:
    sys.exit("the demo needs an explicit gpu tier capacity_gb in " + sys.argv[1])
print(int(cap * 1024))
EOF
) || { say "cannot read the GPU tier size from $config"; exit 1; }
footprint=$((3 * tier_mib))
say "GPU tier ${tier_mib} MiB (from $config); footprint ${footprint} MiB"

# --- run -------------------------------------------------------------------------------
log=$tmp/demo.log
"$runner" --config "$config" --stats-path "$tmp/vstack-%p.json" -- "$demo" --footprint-mib "$footprint" --tier-mib "$tier_mib" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

# --- the tier stats of the final dump -----------------------------------------------------
pid=$(sed -n 's/^vstack demo: pid \([0-9]*\).*/\1/p' "$log" | head -1)
stats=$tmp/vstack-$pid.json
if [ -n "$pid" ] && [ -f "$stats" ]; then
  echo
  if [ -x "$build/tools/vstack-stat" ]; then
    "$build/tools/vstack-stat" --file "$stats"
  else
    python3 - "$stats" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
g = s.get("global", {})
print(f"vstack stats ({sys.argv[1]}): launches {g.get('launches')}, faulted {g.get('launches_faulted')}, "
      f"evictions {g.get('evictions')}, stall {g.get('stall_ns', 0) / 1e6:.1f} ms")
cols = ["capacity", "used", "pages", "faults", "promotions", "demotions", "in", "out", "GB/s in", "GB/s out"]
print(f"{'tier':<6}" + "".join(f"{c:>11}" for c in cols))
mib = lambda b: f"{b / 2**20:.0f} MiB"
for t in s.get("tiers", []):
    row = [mib(t.get("capacity_bytes", 0)), mib(t.get("used_bytes", 0)), t.get("pages", 0), t.get("faults", 0),
           t.get("promotions", 0), t.get("demotions", 0), mib(t.get("bytes_in", 0)), mib(t.get("bytes_out", 0)),
           f"{t.get('gbps_in', 0):.1f}", f"{t.get('gbps_out', 0):.1f}"]
    print(f"{t.get('name', '?'):<6}" + "".join(f"{str(v):>11}" for v in row))
EOF
  fi
else
  say "no stats dump found (expected ${stats})"
fi
exit "$rc"
