#!/usr/bin/env python3
"""Find loads whose first use is a register copy, in a cuobjdump SASS listing.

A MOV (or IMAD.MOV) that reads a load's destination waits for the load, like any other reader. Where a
kernel keeps loads in flight across work (a prefetch), a copy placed soon after the load turns the
prefetch back into a wait: session 29's quantize labs lost their deeper prefetch that way (docs/NOTES.md,
"a register array shifted by one each trip does not prefetch deeper"). This lists, for every global or
shared load (LDG, LDS, LDSM, LDGSTS excluded: it has no register result), the first later instruction in
program order that reads one of its registers, where that reader is a copy, with the distance in
instructions. Program order is only a proxy for time: a copy far from its load (a tile's work later) is
harmless, one a few instructions after it is a stall; read the distance.

Usage: cuobjdump -sass [-fun NAME] lib.o > k.sass; python3 bench/quant/sass_inflight.py k.sass [--max 400]
(cuobjdump is not in Debian's CUDA packages here: the PyPI wheel nvidia-cuda-cuobjdump has one.)
"""

import argparse
import re
import sys

INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,6})\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)\s*(.*?)\s*;")
FUNC = re.compile(r"Function\s*:\s*(\S+)")
REG = re.compile(r"\bR(\d+)\b")
LOADS = ("LDG", "LDS", "LD.", "LDL")  # LDS covers LDSM; LDC (constants) matches none


def load_width(op):
    """Registers a load's destination spans, from its opcode."""
    if op.startswith("LDSM"):
        m = re.search(r"\.(\d)$", op)
        return int(m.group(1)) if m else 1
    for suffix, n in ((".128", 4), (".64", 2)):
        if suffix in op:
            return n
    return 1


def is_load(op):
    return op.startswith(LOADS) and not op.startswith("LDGSTS")


def is_copy(op, operands):
    """A pure register copy: MOV Rd, Rs or IMAD.MOV(.U32) Rd, RZ, RZ, Rs."""
    if op == "MOV":
        return len(operands) == 2
    if op.startswith("IMAD.MOV"):
        return len(operands) == 4 and operands[1] == "RZ" and operands[2] == "RZ"
    return False


def split_operands(text):
    return [t.strip() for t in text.split(",")] if text else []


def parse(lines):
    """[(function, [(addr, op, operands)])] in listing order."""
    funcs, cur = [], None
    for line in lines:
        m = FUNC.search(line)
        if m:
            cur = (m.group(1), [])
            funcs.append(cur)
            continue
        m = INSTR.match(line)
        if m:
            if cur is None:
                cur = ("?", [])
                funcs.append(cur)
            cur[1].append((int(m.group(1), 16), m.group(2), split_operands(m.group(3))))
    return funcs


def sources(op, operands):
    """The operands an instruction reads: all of a store's, all but the first (the destination) otherwise."""
    if op.startswith("ST") or op.startswith(("BRA", "EXIT", "RET", "BAR", "SYNCS", "RED", "ATOM")):
        return operands
    return operands[1:]


def copies_of_loads(instrs, max_distance=None):
    """[(load addr, load op, copy addr, copy text, distance)] for loads whose first reader is a copy."""
    found = []
    for i, (addr, op, operands) in enumerate(instrs):
        if not is_load(op) or not operands:
            continue
        m = REG.search(operands[0])
        if not m:
            continue
        base = int(m.group(1))
        regs = {base + k for k in range(load_width(op))}
        for j in range(i + 1, len(instrs)):
            a2, op2, ops2 = instrs[j]
            read = {int(r) for t in sources(op2, ops2) for r in REG.findall(t)}
            if read & regs:
                if is_copy(op2, ops2) and (max_distance is None or j - i <= max_distance):
                    found.append((addr, op, a2, f"{op2} {', '.join(ops2)}", j - i))
                break
            written = REG.search(ops2[0]) if ops2 and not op2.startswith("ST") else None
            if written and int(written.group(1)) in regs:
                regs.discard(int(written.group(1)))  # redefined before any read
                if not regs:
                    break
    return found


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sass", help="cuobjdump -sass output ('-' for stdin)")
    ap.add_argument("--max", type=int, default=None, help="report only copies at most this many instructions on")
    a = ap.parse_args(argv)
    text = sys.stdin.read() if a.sass == "-" else open(a.sass).read()
    total = 0
    for name, instrs in parse(text.splitlines()):
        hits = copies_of_loads(instrs, a.max)
        total += len(hits)
        if hits:
            print(f"{name}: {len(instrs)} instructions")
            for la, lop, ca, ctext, d in hits:
                print(f"  {la:#07x} {lop:28s} first read by the copy at {ca:#07x} ({d} instructions on): {ctext}")
    print(f"{total} loads whose first reader is a copy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
