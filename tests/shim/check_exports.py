#!/usr/bin/env python3
"""libvstack.so exports exactly the hooks of driver_api.def plus dlsym (both
versions), and depends on nothing beyond the C/C++ runtime (nm -D, ldd)."""
import re
import subprocess
import sys

lib, defs = sys.argv[1], sys.argv[2]
want = set(re.findall(r"^VSTACK_HOOK\((\w+),", open(defs).read(), re.M))
out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
got = set()
versions = set()
for line in out.splitlines():
    parts = line.split()
    if len(parts) < 3 or parts[1] == "A":
        continue
    name, _, ver = parts[2].partition("@")
    got.add(name)
    if name == "dlsym":
        versions.add(ver.lstrip("@"))
errors = []
if got - want - {"dlsym"}:
    errors.append(f"exported but not hooks: {sorted(got - want - {'dlsym'})}")
if want - got:
    errors.append(f"hooks not exported: {sorted(want - got)}")
if versions != {"GLIBC_2.2.5", "GLIBC_2.34"}:
    errors.append(f"dlsym versions: {sorted(versions)}")
allowed = ("linux-vdso", "libc.so", "libstdc++.so", "libm.so", "libgcc_s.so", "ld-linux", "libdl.so", "libpthread.so")
ldd = subprocess.run(["ldd", lib], capture_output=True, text=True, check=True).stdout
for line in ldd.splitlines():
    dep = line.strip().split()[0] if line.strip() else ""
    if dep and not dep.startswith(allowed) and not dep.startswith("/lib64/ld-linux"):
        errors.append(f"unexpected runtime dependency: {line.strip()}")
print(f"{len(want)} hooks, {len(got)} exported symbols")
for e in errors:
    print("FAIL:", e)
sys.exit(1 if errors else 0)
