#!/usr/bin/env python3
"""Tests of vstack-run and vstack-stat (run by meson: see tools/meson.build).

vstack-run: every config in bad_configs/ is refused with exit 2, the message
naming the JSON path (bad_configs/expected.tsv), and the program never starts;
good configs exec the program with LD_PRELOAD / VSTACK_* set, using a harmless
preload library (fake_preload.c) in place of libvstack.so.
vstack-stat: against stats_target (the real StatsDumper): table, --json,
discovery of path and signal from the job's config, refusal to signal a
process that does not catch the signal, timeouts, --watch until exit (final
dump), --file.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

FAILURES = []


def check(cond, what, detail=""):
    if cond:
        print(f"ok    {what}")
    else:
        print(f"FAIL  {what}\n{detail}")
        FAILURES.append(what)


def run(cmd, env=None, timeout=30, **kw):
    return subprocess.run(cmd, env=env, timeout=timeout, capture_output=True, text=True, **kw)


def env_of(output):
    out = {}
    for line in output.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k] = v
    return out


def base_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("VSTACK_") and k != "LD_PRELOAD"}
    env.update(extra)
    return env


def test_run_bad_configs(a, tmp):
    bad = os.path.join(a.source, "tests", "tools", "bad_configs")
    expected = {}
    with open(os.path.join(bad, "expected.tsv")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, text = line.rstrip("\n").split("\t", 1)
            expected[name] = text
    files = sorted(f for f in os.listdir(bad) if f.endswith(".json"))
    check(sorted(expected) == files, "every bad config has an expected message",
          f"files: {files}\nexpected.tsv: {sorted(expected)}")
    marker = os.path.join(tmp, "started")
    for name in files:
        path = os.path.join(bad, name)
        r = run([a.run, "--config", path, "--", "sh", "-c", f"touch {marker}"],
                env=base_env(VSTACK_LIB=a.preload))
        want = expected.get(name, "<missing>")
        check(r.returncode == 2 and want in r.stderr and os.path.realpath(path) in r.stderr
              and not os.path.exists(marker),
              f"vstack-run refuses {name} naming the path",
              f"rc={r.returncode}\nstderr: {r.stderr}\nwanted: {want}")
    # The same with the config given through VSTACK_CONFIG.
    path = os.path.join(bad, "capacity_lots.json")
    r = run([a.run, "sh", "-c", f"touch {marker}"], env=base_env(VSTACK_LIB=a.preload, VSTACK_CONFIG=path))
    check(r.returncode == 2 and f"{path}: $.tiers[1].capacity_gb" in r.stderr and not os.path.exists(marker),
          "vstack-run validates an inherited VSTACK_CONFIG", r.stderr)
    r = run([a.run, "--config", os.path.join(tmp, "nope.json"), "--", "true"], env=base_env(VSTACK_LIB=a.preload))
    check(r.returncode == 2 and "nope.json: cannot open the config file: No such file or directory" in r.stderr,
          "vstack-run: missing config file", r.stderr)
    r = run([a.run, "--log", "loud", "--", "true"], env=base_env(VSTACK_LIB=a.preload))
    check(r.returncode == 2 and 'VSTACK_LOG: expected one of trace' in r.stderr and '"loud"' in r.stderr,
          "vstack-run: bad --log", r.stderr)
    r = run([a.run, "--stats-path", "rel-%p.json", "--", "true"], env=base_env(VSTACK_LIB=a.preload))
    check(r.returncode == 2 and "VSTACK_STATS_PATH: expected an absolute path" in r.stderr,
          "vstack-run: bad --stats-path", r.stderr)
    for args, what in (([], "no program"), (["--bogus", "true"], "unknown option"), (["--config"], "missing value")):
        r = run([a.run] + args, env=base_env(VSTACK_LIB=a.preload))
        check(r.returncode == 2 and "usage: vstack-run" in r.stderr, f"vstack-run usage error: {what}", r.stderr)


def test_run_good(a, tmp):
    mark = os.path.join(tmp, "preloaded")
    for preset in ("default", "demo", "half", "ci"):
        cfg = os.path.join(a.source, "configs", preset + ".json")
        if os.path.exists(mark):
            os.unlink(mark)
        r = run([a.run, "--config", cfg, "--", "env"],
                env=base_env(VSTACK_LIB=a.preload, VSTACK_FAKE_PRELOAD_MARK=mark))
        e = env_of(r.stdout)
        check(r.returncode == 0 and e.get("LD_PRELOAD") == os.path.realpath(a.preload)
              and e.get("VSTACK_CONFIG") == os.path.realpath(cfg) and os.path.exists(mark)
              and "VSTACK_LOG" not in e and "VSTACK_STATS_PATH" not in e,
              f"vstack-run --config configs/{preset}.json -- env",
              f"rc={r.returncode}\nstderr: {r.stderr}\nenv: {e}")
    # Relative config path becomes absolute; options become variables; an
    # existing LD_PRELOAD is kept after ours, and ours is not added twice.
    other = os.path.join(tmp, "libother.so")
    shutil.copy(a.preload, other)
    rel = os.path.relpath(os.path.join(a.source, "configs", "ci.json"), tmp)
    r = run([a.run, "--config", rel, "--log", "debug", "--stats-path", tmp + "/s-%p.json", "env"],
            env=base_env(VSTACK_LIB=a.preload, LD_PRELOAD=other), cwd=tmp)
    e = env_of(r.stdout)
    check(r.returncode == 0 and e.get("LD_PRELOAD") == os.path.realpath(a.preload) + ":" + other
          and e.get("VSTACK_CONFIG") == os.path.realpath(os.path.join(a.source, "configs", "ci.json"))
          and e.get("VSTACK_LOG") == "debug" and e.get("VSTACK_STATS_PATH") == tmp + "/s-%p.json",
          "vstack-run: relative --config, --log, --stats-path, existing LD_PRELOAD", f"{r.stderr}\n{e}")
    r = run([a.run, "env"], env=base_env(VSTACK_LIB=a.preload, LD_PRELOAD=os.path.realpath(a.preload)))
    e = env_of(r.stdout)
    check(r.returncode == 0 and e.get("LD_PRELOAD") == os.path.realpath(a.preload) and "VSTACK_CONFIG" not in e,
          "vstack-run: no duplicate LD_PRELOAD entry; default config", f"{r.stderr}\n{e}")
    # Exit status and arguments pass through (exec, not a child).
    r = run([a.run, "--", "sh", "-c", 'echo "$0|$1"; exit 7', "a b", "--config"], env=base_env(VSTACK_LIB=a.preload))
    check(r.returncode == 7 and r.stdout.strip() == "a b|--config", "vstack-run: arguments and exit status pass through",
          f"rc={r.returncode} out={r.stdout!r} err={r.stderr}")
    r = run([a.run, "--", "/nonexistent/prog"], env=base_env(VSTACK_LIB=a.preload))
    check(r.returncode == 127 and "cannot run /nonexistent/prog" in r.stderr, "vstack-run: missing program -> 127",
          r.stderr)
    r = run([a.run, "true"], env=base_env(VSTACK_LIB=os.path.join(tmp, "missing.so")))
    check(r.returncode == 2 and "VSTACK_LIB=" in r.stderr, "vstack-run: VSTACK_LIB that does not exist", r.stderr)
    # Without VSTACK_LIB: found relative to the executable (installed layout).
    inst = os.path.join(tmp, "prefix")
    os.makedirs(os.path.join(inst, "bin"))
    os.makedirs(os.path.join(inst, "lib"))
    shutil.copy(a.run, os.path.join(inst, "bin", "vstack-run"))
    r = run([os.path.join(inst, "bin", "vstack-run"), "true"], env=base_env())
    check(r.returncode == 2 and "cannot find libvstack.so" in r.stderr and "VSTACK_LIB" in r.stderr,
          "vstack-run: no libvstack.so anywhere", r.stderr)
    shutil.copy(a.preload, os.path.join(inst, "lib", "libvstack.so"))
    r = run([os.path.join(inst, "bin", "vstack-run"), "env"], env=base_env())
    e = env_of(r.stdout)
    check(r.returncode == 0 and e.get("LD_PRELOAD") == os.path.realpath(os.path.join(inst, "lib", "libvstack.so")),
          "vstack-run: finds ../lib/libvstack.so next to itself", f"{r.stderr}\n{e}")


class Target:
    """stats_target running with the given environment."""

    def __init__(self, a, env):
        self.p = subprocess.Popen([a.target], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env, text=True)
        line = self.p.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"stats_target did not start: {line!r} {self.p.stderr.read()}")
        self.pid = self.p.pid

    def finish(self):
        self.p.stdin.close()
        return self.p.wait(timeout=20)


def test_stat(a, tmp):
    cfg = os.path.join(tmp, "job.json")
    with open(cfg, "w") as f:
        json.dump({"stats": {"signal": "SIGUSR2", "path": tmp + "/st-%p.json"}}, f)
    t = Target(a, base_env(VSTACK_CONFIG=cfg))
    dump = f"{tmp}/st-{t.pid}.json"
    try:
        # Path and signal discovered from the job's VSTACK_CONFIG.
        r = run([a.stat, str(t.pid)])
        lines = r.stdout.splitlines()
        gpu = next((l.split() for l in lines if l.startswith("gpu0")), [])
        check(r.returncode == 0 and f"vstack stats: pid {t.pid}" in r.stdout and os.path.exists(dump)
              and gpu[:5] == ["gpu0", "gpu", "1.00", "GiB", "512.00"] and "1234" in gpu and "77" in gpu
              and gpu[-2:] == ["3.00", "0.00"] and any(l.startswith("host0") and "55" in l.split() for l in lines)
              and "2.500 s" in r.stdout and "scan hits" in r.stdout and "999" in r.stdout,
              "vstack-stat PID: the table (path and signal from the job's config)",
              f"rc={r.returncode}\nstdout:\n{r.stdout}\nstderr: {r.stderr}")
        header = next((l.split() for l in lines if l.startswith("tier")), [])
        check(header == ["tier", "kind", "capacity", "used", "pages", "faults", "promoted", "demoted", "in", "out",
                         "GB/s", "in", "GB/s", "out"], "vstack-stat: table columns", "\n".join(lines))
        r = run([a.stat, str(t.pid), "--json"])
        j = json.loads(r.stdout) if r.returncode == 0 else {}
        check(j.get("pid") == t.pid and j["tiers"][0]["faults"] == 1234 and j["global"]["launches"] >= 0,
              "vstack-stat --json", r.stdout + r.stderr)
        r = run([a.stat, str(t.pid), "--path", tmp + "/st-%p.json", "--signal", "USR2"])
        check(r.returncode == 0 and "gpu0" in r.stdout, "vstack-stat --path --signal", r.stderr)
        # A signal the job does not catch: refused, nothing sent, job alive.
        r = run([a.stat, str(t.pid), "--signal", "SIGUSR1"])
        check(r.returncode == 1 and "does not catch SIGUSR1" in r.stderr and "nothing sent" in r.stderr
              and t.p.poll() is None, "vstack-stat refuses a signal the process does not catch", r.stderr)
        # Catches the signal, but we look at the wrong file: a timeout, clearly.
        r = run([a.stat, str(t.pid), "--path", tmp + "/other-%p.json", "--timeout", "0.5"])
        check(r.returncode == 1 and "did not write " + f"{tmp}/other-{t.pid}.json" in r.stderr,
              "vstack-stat: timeout when no dump appears", r.stderr)
        # --watch until the job exits; then the final dump (evictions = 4242).
        w = subprocess.Popen([a.stat, str(t.pid), "--watch", "0.2"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        seen, early = 0, []
        deadline = time.monotonic() + 30
        while seen < 3 and time.monotonic() < deadline:  # three refreshes while the job runs
            line = w.stdout.readline()
            if not line:
                break
            early.append(line)
            seen += line.startswith("vstack stats: pid")
        rc = t.finish()
        out, err = w.communicate(timeout=20)
        out = "".join(early) + out
        check(rc == 0 and w.returncode == 0 and out.count("vstack stats: pid") >= 4
              and f"process {t.pid} exited; its last stats dump" in out and "4242" in out.split("exited")[-1],
              "vstack-stat --watch refreshes until exit, then shows the final dump",
              f"rc={w.returncode}\nstdout:\n{out}\nstderr: {err}")
    finally:
        if t.p.poll() is None:
            t.p.kill()
            t.p.wait()
    # --file: the final dump after the job.
    r = run([a.stat, "--file", dump])
    check(r.returncode == 0 and "gpu0" in r.stdout and "4242" in r.stdout, "vstack-stat --file", r.stdout + r.stderr)
    r = run([a.stat, "--file", dump, "--json"])
    check(r.returncode == 0 and json.loads(r.stdout)["global"]["evictions"] == 4242, "vstack-stat --file --json",
          r.stderr)
    notstats = os.path.join(tmp, "not-stats.json")
    with open(notstats, "w") as f:
        json.dump({"hello": 1}, f)
    r = run([a.stat, "--file", notstats])
    check(r.returncode == 1 and "not a vstack stats dump: $.version is missing" in r.stderr,
          "vstack-stat --file on another JSON file", r.stderr)
    r = run([a.stat, "--file", os.path.join(tmp, "missing.json")])
    check(r.returncode == 1 and "missing.json: No such file or directory" in r.stderr, "vstack-stat --file missing",
          r.stderr)
    # A process without vstack: not killed by a stray SIGUSR1.
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        r = run([a.stat, str(sleeper.pid)])
        time.sleep(0.1)
        check(r.returncode == 1 and "does not catch SIGUSR1" in r.stderr and "vstack-run" in r.stderr
              and sleeper.poll() is None, "vstack-stat on a process without vstack: refused, process unharmed",
              r.stderr)
    finally:
        sleeper.kill()
        sleeper.wait()
    r = run([a.stat, str(sleeper.pid)])
    check(r.returncode == 1 and f"no process {sleeper.pid}" in r.stderr, "vstack-stat on a process that is gone",
          r.stderr)
    for args, what in (([], "no pid"), (["12", "--watch", "0"], "bad --watch"), (["x"], "not a pid"),
                       (["1", "--signal", "SIGFOO"], "bad --signal")):
        r = run([a.stat] + args)
        check(r.returncode == 2 and "usage: vstack-stat" in r.stderr, f"vstack-stat usage error: {what}", r.stderr)
    # The stats thread answers a job started with the stats signal off only by file.
    cfg_off = os.path.join(tmp, "off.json")
    with open(cfg_off, "w") as f:
        json.dump({"stats": {"signal": "off", "path": tmp + "/off-%p.json", "interval_s": 0.05}}, f)
    t = Target(a, base_env(VSTACK_CONFIG=cfg_off))
    try:
        r = run([a.stat, str(t.pid)])
        check(r.returncode == 1 and "turns the stats signal off" in r.stderr and f"--file {tmp}/off-{t.pid}.json"
              in r.stderr, "vstack-stat: a job with stats.signal off", r.stderr)
    finally:
        t.finish()


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--run", "--stat", "--target", "--preload", "--source"):
        ap.add_argument(opt, required=True)
    a = ap.parse_args()
    for k in ("run", "stat", "target", "preload", "source"):
        setattr(a, k, os.path.abspath(getattr(a, k)))
    with tempfile.TemporaryDirectory(prefix="vstack-tools-") as tmp:
        test_run_bad_configs(a, tmp)
        test_run_good(a, tmp)
        test_stat(a, tmp)
    print(f"{len(FAILURES)} failed" if FAILURES else "all passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
