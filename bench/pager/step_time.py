#!/usr/bin/env python3
"""Step time of tests/gpu/pager/train_gpt.py natively and under vstack with the
GPU tier at 1, 1/2 and 1/4 of the job's native peak (max_memory_reserved).

For each paged run: median step time (steps after the snapshot step), ratio to
native, bytes moved per step into/out of the GPU tier (stats deltas between a
snapshot taken after --warmup steps and the final dump at exit, divided by the
steps in between), the transfer bound (those bytes over the copy-engine
bandwidth measured by migration.cu), the stall time per step (stats stall_ns)
and the pager's achieved migration GB/s (stats gbps_in/gbps_out of the GPU
tier) beside the copy-engine figures.

The snapshot: train_gpt.py --signal-at-step W sends SIGUSR1 to itself after
step W and sleeps (outside the timed steps); vstack writes the stats file; this
script copies it as soon as it appears.

Usage: step_time.py BUILD_DIR [--steps 30] [--warmup 5] [--fractions 1,0.5,0.25]
                    [--migration migration.json] [--mode eager|compile|cuda-graphs]
                    [--gpt-args "..."] [--page-mb 32] [--workdir DIR] [--native-only]
Prints a table and writes DIR/step_time.json.
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "..", "..", "tests", "gpu", "pager", "train_gpt.py")


def write_cfg(path, gpu_mib, host_mib, stats_dir, page_mb):
    cfg = {"page_mb": page_mb,
           "tiers": [{"kind": "gpu", "device": 0, "capacity_gb": gpu_mib / 1024},
                     {"kind": "host", "numa_node": 0, "capacity_gb": host_mib / 1024}],
           "policy": {"eviction": "lru"},
           "stats": {"signal": "SIGUSR1", "path": os.path.join(stats_dir, "vstack-%p.json")},
           "log": {"level": "warn"}}
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)


def run_job(cmd, log, snapshot_dir=None, snapshot_to=None, timeout=1800):
    """Runs cmd; while it runs, copies to snapshot_to the first stats file in
    snapshot_dir written after the job announced its signal ("signal ... at T")."""
    done = threading.Event()

    def watch():
        t_sig = None
        while not done.is_set():
            if t_sig is None:
                try:
                    with open(log) as f:
                        for line in f:
                            if line.startswith("signal ") and " at " in line:
                                t_sig = float(line.rsplit(" at ", 1)[1])
                except (OSError, ValueError):
                    pass
            else:
                # The dump's own wall clock, not the file's mtime: on the GPU
                # machines mtimes have whole-second resolution, so the dump
                # taken right after the signal looked older than the signal.
                for path in glob.glob(os.path.join(snapshot_dir, "*.json")):
                    try:
                        with open(path) as f:
                            text = f.read()  # renamed into place whole: complete
                        if json.loads(text).get("time_s", 0) >= t_sig:
                            with open(snapshot_to, "w") as f:
                                f.write(text)
                            return
                    except (OSError, ValueError):
                        pass
            time.sleep(0.02)

    th = None
    if snapshot_dir:
        th = threading.Thread(target=watch, daemon=True)
        th.start()
    env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8", PYTHONUNBUFFERED="1")
    with open(log, "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout).returncode
    done.set()
    if th:
        th.join(timeout=1)
    return rc


def tier0(stats):
    return stats["tiers"][0] if stats and stats.get("tiers") else {}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--fractions", default="1,0.5,0.25")
    ap.add_argument("--migration", default=None, help="JSON {case: gbps} from migration.cu")
    ap.add_argument("--mode", default="eager", choices=["eager", "compile", "cuda-graphs"])
    ap.add_argument("--gpt-args", default="")
    ap.add_argument("--page-mb", type=int, default=32)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--native-only", action="store_true")
    a = ap.parse_args()
    if a.warmup >= a.steps - 2:
        ap.error("--warmup must leave at least 2 steps")
    work = a.workdir or tempfile.mkdtemp(prefix="vstack-step-time.")
    os.makedirs(work, exist_ok=True)
    runner = os.path.join(os.path.abspath(a.build), "tools", "vstack-run")
    bw = {}
    if a.migration and os.path.exists(a.migration):
        bw = json.load(open(a.migration))
    flags = {"eager": [], "compile": ["--compile"], "cuda-graphs": ["--cuda-graphs"]}[a.mode]
    base = [sys.executable, TRAIN, "--steps", str(a.steps), "--signal-at-step", str(a.warmup)] + flags + a.gpt_args.split()

    def timed(js):
        t = js["step_ms"][a.warmup + 1:]
        return statistics.median(t)

    rows = []
    # --- native --------------------------------------------------------------
    nat_json = os.path.join(work, "native.json")
    # natively no snapshot signal (SIGUSR1 would end the process)
    nat_cmd = [sys.executable, TRAIN, "--steps", str(a.steps)] + flags + a.gpt_args.split()
    rc = run_job(nat_cmd + ["--out", nat_json], os.path.join(work, "native.log"))
    if rc != 0:
        print(f"native run failed (exit {rc}); log {work}/native.log")
        return 1
    nat = json.load(open(nat_json))
    nat_ms = timed(nat)
    peak_mib = nat["max_memory_reserved"] / 2**20
    rows.append({"run": "native", "tier_mib": None, "median_ms": nat_ms, "ratio": 1.0})
    print(f"native: median step {nat_ms:.2f} ms, max_memory_reserved {peak_mib:.0f} MiB, {nat['device']}", flush=True)

    # --- paged ---------------------------------------------------------------
    for frac in ([] if a.native_only else [float(x) for x in a.fractions.split(",")]):
        pg = a.page_mb
        tier = peak_mib * frac
        tier = (int(-(-tier // pg)) if frac >= 1 else int(tier // pg)) * pg  # peak: round up; fractions: down
        host = int((2 * peak_mib + 4096) // pg * pg)
        name = f"tier={frac:g}peak"
        d = os.path.join(work, name)
        sdir = os.path.join(d, "stats")
        os.makedirs(sdir, exist_ok=True)
        cfg = os.path.join(d, "config.json")
        write_cfg(cfg, tier, host, sdir, pg)
        snap = os.path.join(d, "snapshot.json")
        out = os.path.join(d, "run.json")
        rc = run_job([runner, "--config", cfg, "--"] + base + ["--out", out], os.path.join(d, "run.log"),
                     snapshot_dir=sdir, snapshot_to=snap)
        row = {"run": name, "tier_mib": tier}
        if rc != 0 or not os.path.exists(out):
            row["error"] = f"exit {rc}, log {d}/run.log"
            rows.append(row)
            print(f"{name}: FAILED ({row['error']})", flush=True)
            continue
        js = json.load(open(out))
        row["median_ms"] = timed(js)
        row["ratio"] = row["median_ms"] / nat_ms
        row["losses_match"] = js["losses"] == nat["losses"]
        finals = sorted(glob.glob(os.path.join(sdir, "*.json")), key=os.path.getmtime)
        if finals and os.path.exists(snap):
            s0, s1 = json.load(open(snap)), json.load(open(finals[-1]))
            n = a.steps - 1 - a.warmup
            g0, g1 = tier0(s0), tier0(s1)
            bin_ = (g1.get("bytes_in", 0) - g0.get("bytes_in", 0)) / n
            bout = (g1.get("bytes_out", 0) - g0.get("bytes_out", 0)) / n
            stall = (s1["global"].get("stall_ns", 0) - s0["global"].get("stall_ns", 0)) / n / 1e6
            row.update(in_mib_step=bin_ / 2**20, out_mib_step=bout / 2**20, stall_ms_step=stall,
                       gbps_in=g1.get("gbps_in"), gbps_out=g1.get("gbps_out"),
                       faults_step=(g1.get("faults", 0) - g0.get("faults", 0)) / n)
            # transfer bound: the copies alone, at the measured copy-engine rates
            # (GB/s = 1e9 B/s), overlapping both directions at best
            if bw.get("h2d") and bw.get("d2h"):
                parts = [bin_ / (bw["h2d"] * 1e9), bout / (bw["d2h"] * 1e9)]
                if bw.get("both"):
                    parts.append((bin_ + bout) / (bw["both"] * 1e9))
                row["bound_ms"] = max(parts) * 1e3
                row["vs_bound"] = row["median_ms"] / row["bound_ms"] if row["bound_ms"] > 0 else None
        else:
            row["error"] = "no stats snapshot/final dump"
        rows.append(row)
        print(f"{name}: {json.dumps(row)}", flush=True)

    # --- table ---------------------------------------------------------------
    def f(v, fmt):
        return format(v, fmt) if isinstance(v, (int, float)) and v is not None else "-"
    print()
    print(f"step time, {a.mode}, {a.steps} steps (median of steps {a.warmup + 1}..{a.steps - 1}), native peak "
          f"{peak_mib:.0f} MiB, {nat['device']}, copy engine h2d/d2h/both "
          f"{bw.get('h2d', '-')}/{bw.get('d2h', '-')}/{bw.get('both', '-')} GB/s")
    hdr = ["run", "tier MiB", "step ms", "x native", "in MiB/st", "out MiB/st", "bound ms", "x bound",
           "stall ms/st", "GB/s in", "GB/s out", "losses"]
    print("".join(f"{h:>12}" for h in hdr))
    for r in rows:
        cells = [r["run"], f(r.get("tier_mib"), ".0f"), f(r.get("median_ms"), ".2f"), f(r.get("ratio"), ".3f"),
                 f(r.get("in_mib_step"), ".0f"), f(r.get("out_mib_step"), ".0f"), f(r.get("bound_ms"), ".2f"),
                 f(r.get("vs_bound"), ".2f"), f(r.get("stall_ms_step"), ".2f"), f(r.get("gbps_in"), ".1f"),
                 f(r.get("gbps_out"), ".1f"),
                 "-" if "losses_match" not in r else ("same" if r["losses_match"] else "DIFFER")]
        print("".join(f"{c:>12}" for c in cells) + (f"  {r['error']}" if "error" in r else ""))
    with open(os.path.join(work, "step_time.json"), "w") as fo:
        json.dump({"mode": a.mode, "steps": a.steps, "warmup": a.warmup, "native_peak_mib": peak_mib,
                   "copy_engine_gbps": bw, "rows": rows}, fo, indent=1)
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
