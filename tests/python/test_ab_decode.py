"""bench/quant/ab_decode.sh and rounds.sh end to end without a GPU: `python3` on PATH is a stand-in that answers
for matmul_digest.py and bench_fp4.py (from the library file it is given, which here holds a number of
microseconds, plus $AB_ADD) and runs every other script (compare.py) with the real interpreter. Checks the
rotated order, each variant's environment, what OUTDIR holds (the device returns at most 8 files), the ratios,
and that a digest mismatch stops the run."""

import json
import lzma
import os
import stat
import subprocess
import sys
import tarfile

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SCRIPT = os.path.join(ROOT, "bench", "quant", "ab_decode.sh")
ROUNDS = os.path.join(ROOT, "bench", "quant", "rounds.sh")

# The stand-in. Each call appends "<script> <library contents>" to $AB_CALLS. bench_fp4.py writes one decode
# cell, 8192x8192 M = 1 nvfp4, taking the library's number of microseconds; matmul_digest.py passes, and with
# --compare fails where the library's number differs from 10 by more than 5 (a lab that changed y).
SHIM = r'''#!/bin/sh
case "$1" in
  *bench_fp4.py|*matmul_digest.py) exec "$AB_REAL_PYTHON" "$AB_SHIM_PY" "$@" ;;
  *) exec "$AB_REAL_PYTHON" "$@" ;;
esac
'''
SHIM_PY = r'''
import json, os, sys
script, args = os.path.basename(sys.argv[1]), sys.argv[2:]
us = float(open(os.environ["VSTACK_KERNELS_LIB"]).read()) + float(os.environ.get("AB_ADD", "0"))
with open(os.environ["AB_CALLS"], "a") as f:
    f.write(f"{script} {us:g}\n")
if script == "bench_fp4.py":
    out = args[args.index("--json") + 1]
    json.dump({"gemm": [{"N": 8192, "K": 8192, "M": 1, "nvfp4": {"us": us, "pct_read": 1000.0 / us}}]},
              open(out, "w"))
    print("bench done")
elif "--compare" in args and abs(us - 10.0) > 5.0:
    print("MISMATCH nvfp4 8192x8192 M 1")
    print("575 passed, 1 failed")
    sys.exit(1)
else:
    if "--out" in args:
        json.dump({"digests": {}}, open(args[args.index("--out") + 1], "w"))
    print("576 passed, 0 failed")
'''


def stand_in(tmp_path):
    """The environment that puts the stand-in python3 first on PATH; calls are logged to tmp_path/calls.txt."""
    shim_dir = tmp_path / "shim"
    shim_dir.mkdir()
    shim = shim_dir / "python3"
    shim.write_text(SHIM)
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "shim.py").write_text(SHIM_PY)
    return dict(os.environ, PATH=f"{shim_dir}:{os.environ['PATH']}", AB_REAL_PYTHON=sys.executable,
                AB_SHIM_PY=str(tmp_path / "shim.py"), AB_CALLS=str(tmp_path / "calls.txt"),
                VSTACK_AB_WORK=str(tmp_path / "work"))


def calls_of(tmp_path):
    calls = tmp_path / "calls.txt"
    return calls.read_text().split("\n")[:-1] if calls.exists() else []


def run_ab(tmp_path, base_us, lab_us, rounds="3"):
    env = stand_in(tmp_path)
    base = tmp_path / "base.so"
    base.write_text(str(base_us))
    lab = tmp_path / "lab.so.xz"  # the compressed form is unpacked
    with lzma.open(lab, "wt") as f:
        f.write(str(lab_us))
    out = tmp_path / "out"
    p = subprocess.run(["bash", SCRIPT, str(base), str(lab), str(out), rounds], env=env, capture_output=True,
                       text=True, timeout=120)
    return p, out, calls_of(tmp_path)


def test_rotated_rounds_six_files_and_ratios(tmp_path):
    p, out, calls = run_ab(tmp_path, 10.0, 12.0)
    assert p.returncode == 0, p.stderr
    # digests of base, then of lab against them; then rounds base lab / lab base / base lab, bf16 and f16 each
    assert calls[:2] == ["matmul_digest.py 10", "matmul_digest.py 12"]
    order = [c.split()[1] for c in calls[2:]]
    assert order == ["10", "10", "12", "12", "12", "12", "10", "10", "10", "10", "12", "12"]
    files = sorted(os.listdir(out))
    assert files == ["compare_bf16.txt", "compare_f16.txt", "digest_base.json", "digest_base.log",
                     "digest_lab.log", "runs.tar.gz"]
    with tarfile.open(out / "runs.tar.gz") as t:
        names = {n for n in t.getnames() if n.endswith(".json")}
    assert names == {f"{dt}/{v}_{r}.json" for dt in ("bf16", "f16") for v in ("base", "lab") for r in (1, 2, 3)}
    for dt in ("bf16", "f16"):
        table = (out / f"compare_{dt}.txt").read_text()
        assert "1.200 (1.20-1.20)" in table  # 12 us against 10 in every round
        assert "geometric mean lab / base: 1.2000 over 1 cells" in table


def test_a_digest_mismatch_stops_before_the_bench(tmp_path):
    p, out, calls = run_ab(tmp_path, 10.0, 20.0)
    assert p.returncode == 1
    assert "no bench" in p.stderr and "MISMATCH" in p.stdout
    assert calls == ["matmul_digest.py 10", "matmul_digest.py 20"]
    assert not (out / "runs.tar.gz").exists()


def test_rounds_of_one_library_under_three_settings(tmp_path):
    env = stand_in(tmp_path)
    lib = tmp_path / "lib.so"
    lib.write_text("10")
    out = tmp_path / "out"
    p = subprocess.run(["bash", ROUNDS, str(out), "3", f"e2={lib}", f"e1={lib},AB_ADD=5", f"e3={lib},AB_ADD=1,X=y",
                        "--", "--m", "1"], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    # rounds shifted by one: e2 e1 e3, e1 e3 e2, e3 e2 e1 (bf16 then f16 each); the settings reach each run
    order = [c.split()[1] for c in calls_of(tmp_path)]
    seq = ["10", "15", "11", "15", "11", "10", "11", "10", "15"]
    assert order == [u for u in seq for _ in range(2)]
    assert sorted(os.listdir(out)) == ["compare_bf16.txt", "compare_f16.txt", "runs.tar.gz"]
    table = (out / "compare_bf16.txt").read_text()
    assert "geometric mean e1 / e2: 1.5000 over 1 cells" in table
    assert "geometric mean e3 / e2: 1.1000 over 1 cells" in table


def test_rounds_rejects_a_bad_variant(tmp_path):
    env = stand_in(tmp_path)
    lib = tmp_path / "lib.so"
    lib.write_text("10")
    for specs in ([f"a_b={lib}", f"c={lib}"], [f"a={lib}", f"c={tmp_path / 'missing.so'}"], [f"a={lib}"]):
        p = subprocess.run(["bash", ROUNDS, str(tmp_path / "out"), "3", *specs], env=env, capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 2 and "rounds:" in p.stderr
    assert calls_of(tmp_path) == []
