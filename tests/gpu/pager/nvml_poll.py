#!/usr/bin/env python3
"""Samples GPU memory from OUTSIDE the process under test, until SIGTERM/SIGINT.

Writes one JSON object per line to OUT:
  {"t": seconds, "apps": {"<pid>": MiB, ...}, "gpu_used": MiB}
`apps` is the per-process memory NVML reports (compute processes on GPU
--device), `gpu_used` the whole device's used memory. Uses pynvml when it is
importable, else calls `nvidia-smi` each interval.

Usage: nvml_poll.py OUT [--interval 0.1] [--device 0]
"""
import argparse
import json
import signal
import subprocess
import sys
import time

stop = False


def _stop(*_):
    global stop
    stop = True


def sampler_pynvml(device):
    import pynvml  # noqa: raises ImportError when absent
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(device)

    def sample():
        apps = {}
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            if p.usedGpuMemory is not None:
                apps[str(p.pid)] = p.usedGpuMemory / 2**20
        used = pynvml.nvmlDeviceGetMemoryInfo(h).used / 2**20
        return apps, used
    return sample


def sampler_smi(device):
    def sample():
        apps = {}
        out = subprocess.run(["nvidia-smi", "-i", str(device), "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = [x.strip() for x in line.split(",")]
            if len(parts) == 2 and parts[0].isdigit():
                try:
                    apps[parts[0]] = float(parts[1])
                except ValueError:
                    pass
        out = subprocess.run(["nvidia-smi", "-i", str(device), "--query-gpu=memory.used",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
        try:
            used = float(out.strip().splitlines()[0])
        except (ValueError, IndexError):
            used = float("nan")
        return apps, used
    return sample


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--device", type=int, default=0)
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        sample = sampler_pynvml(a.device)
        how = "pynvml"
    except Exception:
        sample = sampler_smi(a.device)
        how = "nvidia-smi"
    t0 = time.monotonic()
    with open(a.out, "w") as f:
        f.write(json.dumps({"source": how}) + "\n")
        while not stop:
            t = time.monotonic()
            apps, used = sample()
            f.write(json.dumps({"t": round(t - t0, 3), "apps": apps, "gpu_used": used}) + "\n")
            f.flush()
            time.sleep(max(0.0, a.interval - (time.monotonic() - t)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
