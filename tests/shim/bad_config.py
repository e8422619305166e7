#!/usr/bin/env python3
"""The shim alone (no launcher) refuses every bad config at load: the process
aborts before main with an error naming the JSON path, never runs unpaged."""
import os
import subprocess
import sys

prog, lib, folder = sys.argv[1], sys.argv[2], sys.argv[3]
# Checks the launcher makes on the filesystem (directories exist) are not the shim's.
launcher_only = {"nvme_missing_dir.json", "stats_dir_missing.json"}
failures = 0
cases = 0
for line in open(os.path.join(folder, "expected.tsv")):
    if line.startswith("#") or not line.strip():
        continue
    name, text = line.rstrip("\n").split("\t", 1)
    if name in launcher_only:
        continue
    cases += 1
    env = dict(os.environ, LD_PRELOAD=lib, VSTACK_CONFIG=os.path.join(folder, name))
    r = subprocess.run([prog, "--list-tests"], env=env, capture_output=True, text=True, timeout=60)
    ok = r.returncode != 0 and text in r.stderr and name in r.stderr and "Matching test cases" not in r.stdout
    if not ok:
        failures += 1
        print(f"FAIL {name}: rc={r.returncode}\n  expected on stderr: {text}\n  stderr: {r.stderr.strip()[:400]}")
print(f"{cases - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
