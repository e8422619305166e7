#!/usr/bin/env python3
"""Compare the device code of two builds of libvstack_kernels.so on the CPU machine, before spending GPU time.

Usage: bench/quant/sass_diff.py A B [--kernel SUBSTR] [--span OPCODE]
  A, B: libraries (cubins extracted with `cuobjdump -xelf all`) or folders of .cubin files.
  First the cubins: how many are byte-identical (compared as sets of digests: cuobjdump numbers the extracted
  files differently from build to build, and two builds of one tree differ as .so files). Then, for every kernel
  of the cubins that differ whose mangled name contains SUBSTR (all by default): its instruction count in A and
  B and the lines of a diff of the two after the registers (R, UR, P, UP) and the labels are renamed, so that a
  pure renumbering counts 0. --span OPCODE restricts each kernel to its instructions from the first to the last
  whose opcode starts with OPCODE (e.g. HMUL2 for the shifted-pairs loop).
Tools: $CUOBJDUMP and $NVDISASM, else cuobjdump / nvdisasm on PATH or under /usr/local/cuda/bin (the CPU
machine has neither: the PyPI wheels nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm carry them,
docs/NOTES.md). Exit status 0 when every cubin is identical, 1 when some differ, 2 on bad input.
"""

import argparse
import difflib
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

SECTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
INSTR = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")
REGS = re.compile(r"\bU?R[0-9]+\b|\bU?P[0-9]\b")
LABELS = re.compile(r"\.L_x_[0-9]+")


def tool(name):
    """The path of cuobjdump or nvdisasm, or an error naming where it was looked for."""
    env = os.environ.get(name.upper())
    for cand in [env] if env else [shutil.which(name), os.path.join("/usr/local/cuda/bin", name)]:
        if cand and os.access(cand, os.X_OK):
            return cand
    raise SystemExit(f"sass_diff: no {name} (set ${name.upper()}; the PyPI wheel nvidia-cuda-{name} has it)")


def parse(text):
    """nvdisasm -c output -> {section name: [instruction text]} (predicates and operands kept, addresses not)."""
    kernels, cur = {}, None
    for line in text.splitlines():
        m = SECTION.match(line)
        if m:
            cur = m.group(1)
            kernels[cur] = []
            continue
        m = INSTR.match(line)
        if m and cur is not None:
            kernels[cur].append(" ".join(m.group(1).split()))
    return kernels


def normalise(ins):
    return LABELS.sub("L", REGS.sub(lambda m: "UR" if m.group(0).startswith("UR") else
                                    "UP" if m.group(0).startswith("UP") else m.group(0)[0], ins))


def opcode(ins):
    words = ins.split()
    return words[1] if words and words[0].startswith("@") and len(words) > 1 else (words[0] if words else "")


def span(instrs, op):
    """The instructions from the first to the last whose opcode starts with op ([] if none has it)."""
    idx = [i for i, ins in enumerate(instrs) if opcode(ins).startswith(op)]
    return instrs[idx[0]:idx[-1] + 1] if idx else []


def diff_lines(a, b):
    """Lines of a unified diff of the normalised instruction lists (0: the same up to register names)."""
    na, nb = [normalise(x) for x in a], [normalise(x) for x in b]
    return sum(1 for d in difflib.ndiff(na, nb) if d[:1] in "+-")


def cubins(src, work):
    """{md5: path} of the cubins of a library (extracted into work) or of a folder."""
    if os.path.isdir(src):
        paths = glob.glob(os.path.join(src, "*.cubin"))
    elif os.path.isfile(src):
        os.makedirs(work, exist_ok=True)
        r = subprocess.run([tool("cuobjdump"), "-xelf", "all", os.path.abspath(src)], cwd=work,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"sass_diff: cuobjdump failed on {src}: {r.stderr.strip()}")
        paths = glob.glob(os.path.join(work, "*.cubin"))
    else:
        raise SystemExit(f"sass_diff: no such library or folder: {src}")
    if not paths:
        raise SystemExit(f"sass_diff: no cubins in {src}")
    return {hashlib.md5(open(p, "rb").read()).hexdigest(): p for p in paths}


def disassemble(paths):
    out = {}
    for p in paths:
        r = subprocess.run([tool("nvdisasm"), "-c", p], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"sass_diff: nvdisasm failed on {p}: {r.stderr.strip()}")
        out.update(parse(r.stdout))
    return out


def report(ka, kb, substr, op):
    """Rows (name, count A, count B, diff lines) for the kernels in either set whose name contains substr."""
    rows = []
    for name in sorted(set(ka) | set(kb)):
        if substr and substr not in name:
            continue
        a, b = ka.get(name), kb.get(name)
        if op:
            a, b = (span(x, op) if x is not None else None for x in (a, b))
        d = diff_lines(a, b) if a is not None and b is not None else None
        rows.append((name, None if a is None else len(a), None if b is None else len(b), d))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--kernel", default="", help="only kernels whose mangled name contains this")
    ap.add_argument("--span", default="", help="only each kernel's instructions between the first and last of this opcode")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        ca, cb = cubins(args.a, os.path.join(tmp, "a")), cubins(args.b, os.path.join(tmp, "b"))
        same = set(ca) & set(cb)
        print(f"cubins: {len(same)} identical; {len(ca) - len(same)} of A's {len(ca)} and {len(cb) - len(same)} "
              f"of B's {len(cb)} differ")
        if same == set(ca) == set(cb):
            return 0
        ka = disassemble([p for h, p in ca.items() if h not in same])
        kb = disassemble([p for h, p in cb.items() if h not in same])
        rows = report(ka, kb, args.kernel, args.span)
        changed = [r for r in rows if r[3] != 0]
        print(f"kernels in the differing cubins{' matching ' + repr(args.kernel) if args.kernel else ''}: "
              f"{len(rows)}, {len(changed)} with other instructions than A's (registers and labels renamed)")
        for name, na, nb, d in changed:
            fmt = lambda v: "-" if v is None else str(v)
            print(f"  {fmt(na):>6} {fmt(nb):>6} {fmt(d):>6}  {name}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
