"""bench/quant/sass_inflight.py on made-up SASS: which loads are first read by a register copy."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "quant"))
import sass_inflight  # noqa: E402

LISTING = """
\t\tFunction : kernel_a
        /*0000*/                   MOV R1, c[0x0][0x28] ;                                     /* 0x00000a0000017a02 */
        /*0010*/              @!P1 LDG.E.NA.128.CONSTANT R40, desc[UR14][R2.64] ;             /* 0x0000000e02289981 */
        /*0020*/                   LDS R8, [R7+0x880] ;                                       /* 0x0008800007087984 */
        /*0030*/                   FADD R9, R8, R3 ;                                          /* 0x0000000308097221 */
        /*0040*/                   LDG.E.U16 R10, desc[UR8][R4.64] ;                          /* 0x000000080404a981 */
        /*0050*/                   MOV R10, R6 ;                                              /* 0x0000000600107202 */
        /*0060*/                   STS [R14], R13 ;                                           /* 0x0000000d0e007388 */
        /*0070*/                   IMAD.MOV.U32 R12, RZ, RZ, R42 ;                            /* 0x000000ffff0c7224 */
        /*0080*/                   MOV R11, R10 ;                                             /* 0x0000000a000b7202 */
\t\tFunction : kernel_b
        /*0000*/                   LDSM.16.M88.4 R20, [R5] ;                                  /* 0x000000000514783b */
        /*0010*/                   STS [R30], R23 ;                                           /* 0x000000171e007388 */
        /*0020*/                   LDG.E.64 R50, desc[UR4][R2.64] ;                           /* 0x0000000402327981 */
        /*0030*/                   MOV R60, R51 ;                                             /* 0x0000003300307202 */
"""


def test_copies_of_loads_in_each_function():
    funcs = dict(sass_inflight.parse(LISTING.splitlines()))
    assert set(funcs) == {"kernel_a", "kernel_b"} and len(funcs["kernel_a"]) == 9
    # kernel_a: R40..R43 (LDG.128) first read by the IMAD.MOV of R42, six instructions on; R8 (LDS) by an FADD,
    # not a copy; R10 (LDG.U16) redefined by a MOV before any read, so the later copy of R10 is not the load's
    hits = sass_inflight.copies_of_loads(funcs["kernel_a"])
    assert [(la, ca, d) for la, _, ca, _, d in hits] == [(0x10, 0x70, 6)]
    assert hits[0][1] == "LDG.E.NA.128.CONSTANT" and hits[0][3] == "IMAD.MOV.U32 R12, RZ, RZ, R42"
    # kernel_b: LDSM .4 spans R20..R23, first read by a store (not a copy); LDG.64 R50..R51 by a MOV
    hits_b = sass_inflight.copies_of_loads(funcs["kernel_b"])
    assert [(la, ca, d) for la, _, ca, _, d in hits_b] == [(0x20, 0x30, 1)]


def test_max_distance_and_main(tmp_path, capsys):
    funcs = dict(sass_inflight.parse(LISTING.splitlines()))
    assert sass_inflight.copies_of_loads(funcs["kernel_a"], max_distance=5) == []
    path = tmp_path / "k.sass"
    path.write_text(LISTING)
    assert sass_inflight.main([str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "2 loads whose first reader is a copy"
    assert any("kernel_b" in line for line in out) and any("(6 instructions on)" in line for line in out)


def test_load_widths():
    assert sass_inflight.load_width("LDG.E.NA.128.CONSTANT") == 4
    assert sass_inflight.load_width("LDS.64") == 2
    assert sass_inflight.load_width("LDSM.16.M88.2") == 2
    assert sass_inflight.load_width("LDS.U8") == 1
    assert not sass_inflight.is_load("LDGSTS.E.BYPASS.128") and not sass_inflight.is_load("LDC.64")
