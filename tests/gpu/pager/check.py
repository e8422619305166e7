#!/usr/bin/env python3
"""Checks used by tests/gpu/pager/run.sh (and bench/pager). Subcommands:

  losses NATIVE.json PAGED.json
      Same number of steps and bit-identical losses -> exit 0. Otherwise prints
      the largest absolute (and relative) difference and its step -> exit 1.
  memory POLL.jsonl [--pid PID] [--limit-mib L]
      Peak GPU memory of the process as NVML saw it from outside (nvml_poll.py).
      Per-process figure when NVML lists PID; if it lists other pids only (a
      pid namespace), the sum over all listed processes; if it lists none, the
      device's used memory minus the lowest value seen (the poll starts before
      the job). Exit 1 when the peak exceeds --limit-mib.
  stats DIR_OR_FILE [--require-demotions] [--require-oom N]
      Prints the tier table of the last vstack stats dump; with the options,
      exit 1 unless the GPU tier demoted pages / at least N allocations were
      refused (proof that the test really paged / really hit the limit).
  field FILE.json KEY
      Prints one top-level field of a JSON file (for shell scripts).
"""
import glob
import json
import math
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def cmd_losses(a, b):
    la, lb = load(a)["losses"], load(b)["losses"]
    if len(la) != len(lb):
        print(f"different step counts: {len(la)} vs {len(lb)}")
        return 1
    worst, worst_i, ndiff = 0.0, -1, 0
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y or math.isnan(x) != math.isnan(y):
            ndiff += 1
            d = abs(x - y) if not (math.isnan(x) or math.isnan(y)) else math.inf
            if d >= worst:
                worst, worst_i = d, i
    if ndiff == 0:
        print(f"bit-identical over {len(la)} steps (last loss {la[-1]!r})")
        return 0
    rel = worst / abs(la[worst_i]) if la[worst_i] else math.inf
    print(f"{ndiff}/{len(la)} steps differ; largest |diff| {worst!r} (rel {rel:.3g}) at step {worst_i}: "
          f"native {la[worst_i]!r} vs paged {lb[worst_i]!r}; first difference at step "
          f"{next(i for i, (x, y) in enumerate(zip(la, lb)) if x != y)}")
    return 1


def cmd_memory(path, pid=None, limit=None):
    samples, source = [], "?"
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                s = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut off when the poller was stopped
            if "source" in s:
                source = s["source"]
            else:
                samples.append(s)
    if not samples:
        print("no NVML samples")
        return 1
    own = [s["apps"][str(pid)] for s in samples if pid is not None and str(pid) in s["apps"]]
    any_apps = [sum(s["apps"].values()) for s in samples if s["apps"]]
    used = [s["gpu_used"] for s in samples if s["gpu_used"] == s["gpu_used"]]
    if own:
        peak, how = max(own), f"NVML per-process, pid {pid}"
    elif any_apps:
        peak, how = max(any_apps), "NVML sum over listed processes (pid not listed: pid namespace?)"
    elif used:
        peak, how = max(used) - min(used), "device memory.used minus its lowest sample"
    else:
        print("no usable NVML samples")
        return 1
    verdict = ""
    rc = 0
    if limit is not None:
        ok = peak <= limit
        rc = 0 if ok else 1
        verdict = f" <= limit {limit:.0f} MiB: ok" if ok else f" > limit {limit:.0f} MiB: EXCEEDED"
    print(f"peak {peak:.0f} MiB ({how}, {len(samples)} samples via {source}){verdict}")
    return rc


def last_stats(p):
    if os.path.isdir(p):
        files = sorted(glob.glob(os.path.join(p, "*.json")), key=os.path.getmtime)
        if not files:
            return None, None
        p = files[-1]
    return p, load(p)


def cmd_stats(p, require_demotions=False, require_oom=None):
    path, s = last_stats(p)
    if s is None:
        print(f"no stats dump in {p}")
        return 1
    g = s.get("global", {})
    print(f"stats {path}: launches {g.get('launches')} faulted {g.get('launches_faulted')} "
          f"stall {g.get('stall_ns', 0) / 1e6:.1f} ms evictions {g.get('evictions')} oom_returns {g.get('oom_returns')}")
    print(f"  {'tier':<6} {'cap MiB':>9} {'used MiB':>9} {'pages':>6} {'faults':>7} {'promo':>7} {'demo':>7} "
          f"{'in MiB':>9} {'out MiB':>9} {'GB/s in':>8} {'GB/s out':>8}")
    for t in s.get("tiers", []):
        print(f"  {t.get('name', '?'):<6} {t.get('capacity_bytes', 0) / 2**20:>9.0f} {t.get('used_bytes', 0) / 2**20:>9.0f} "
              f"{t.get('pages', 0):>6} {t.get('faults', 0):>7} {t.get('promotions', 0):>7} {t.get('demotions', 0):>7} "
              f"{t.get('bytes_in', 0) / 2**20:>9.0f} {t.get('bytes_out', 0) / 2**20:>9.0f} "
              f"{t.get('gbps_in', 0):>8.1f} {t.get('gbps_out', 0):>8.1f}")
    rc = 0
    tiers = s.get("tiers", [])
    if require_demotions and not (tiers and tiers[0].get("demotions", 0) > 0):
        print("  the GPU tier demoted nothing: the test did not page")
        rc = 1
    if require_oom is not None and g.get("oom_returns", 0) < require_oom:
        print(f"  oom_returns {g.get('oom_returns')} < {require_oom}")
        rc = 1
    return rc


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 64
    cmd, rest = argv[1], argv[2:]

    def opt(name, conv=str, default=None):
        if name in rest:
            i = rest.index(name)
            v = rest[i + 1]
            del rest[i:i + 2]
            return conv(v)
        return default

    def flag(name):
        if name in rest:
            rest.remove(name)
            return True
        return False

    if cmd == "losses":
        return cmd_losses(rest[0], rest[1])
    if cmd == "memory":
        pid = opt("--pid", int)
        limit = opt("--limit-mib", float)
        return cmd_memory(rest[0], pid, limit)
    if cmd == "stats":
        dem = flag("--require-demotions")
        oom = opt("--require-oom", int)
        return cmd_stats(rest[0], dem, oom)
    if cmd == "field":
        v = load(rest[0])[rest[1]]
        print(v)
        return 0
    print(__doc__)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
