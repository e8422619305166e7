"""bench/quant/sass_diff.py on made-up nvdisasm output: parsing, renaming, spans, the cubin sets, bad input."""

import os
import stat
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "quant"))
import sass_diff  # noqa: E402


def listing(kernels):
    """nvdisasm -c's shape: a section header per kernel, then /*addr*/ instruction ; lines."""
    out = ["\t.target\tsm_90a", ""]
    for name, instrs in kernels.items():
        out += [f"//--------------------- .text.{name} ---", f"\t.section\t.text.{name},\"ax\",@progbits",
                f"{name}:"]
        out += [f"        /*{16 * i:04x}*/                   {ins} ;" for i, ins in enumerate(instrs)]
    return "\n".join(out) + "\n"


LOOP = ["S2R R5, SR_TID.X", "@!P0 BRA `(.L_x_12)", "PRMT R8, R2, 0x3240, R3", "HMUL2.BF16_V2 R9, R8, R10.H0_H0",
        "HMMA.16816.F32.BF16 R20, R12, R16, R20", "HMUL2.BF16_V2 R9, R8, R10.H1_H1", "UIADD3 UR4, UR4, 0x1, URZ", "EXIT"]


def test_parse_normalise_and_span():
    k = sass_diff.parse(listing({"k1": LOOP, "k2": ["NOP", "EXIT"]}))
    assert list(k) == ["k1", "k2"] and k["k1"] == LOOP and k["k2"] == ["NOP", "EXIT"]
    assert sass_diff.normalise("@!P0 BRA `(.L_x_12)") == "@!P BRA `(L)"
    assert sass_diff.normalise("UIADD3 UR4, UR4, 0x1, URZ") == "UIADD3 UR, UR, 0x1, URZ"  # RZ / URZ / PT stay
    assert sass_diff.normalise("S2R R5, SR_TID.X") == "S2R R, SR_TID.X"
    assert sass_diff.opcode("@!P0 BRA `(.L_x_12)") == "BRA"
    assert sass_diff.span(LOOP, "HMUL2") == LOOP[3:6]
    assert sass_diff.span(LOOP, "FFMA") == []


def test_diff_counts_only_real_changes():
    renamed = [ins.replace("R8", "R30").replace("R9", "R31").replace(".L_x_12", ".L_x_99") for ins in LOOP]
    assert sass_diff.diff_lines(LOOP, renamed) == 0
    moved = LOOP[:3] + [LOOP[4], LOOP[3]] + LOOP[5:]  # two instructions swapped: one out, one in
    assert sass_diff.diff_lines(LOOP, moved) == 2
    rows = sass_diff.report({"a_k": LOOP, "b_k": LOOP}, {"a_k": renamed, "b_k": LOOP + ["NOP"]}, "", "")
    assert rows == [("a_k", 8, 8, 0), ("b_k", 8, 9, 1)]
    assert sass_diff.report({"a_k": LOOP}, {"a_k": renamed}, "b_", "") == []
    assert sass_diff.report({"a_k": LOOP}, {}, "", "HMUL2") == [("a_k", 3, None, None)]


def fake_nvdisasm(tmp_path):
    """A stand-in nvdisasm that prints the listing saved next to each cubin (<cubin>.txt)."""
    p = tmp_path / "nvdisasm"
    p.write_text('#!/bin/sh\nshift\ncat "$1.txt"\n')
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


def test_main_on_cubin_folders(tmp_path, monkeypatch, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    for d, name, body in [(a, "x.1.cubin", b"same"), (b, "y.7.cubin", b"same"),  # numbered differently
                          (a, "x.2.cubin", b"old"), (b, "y.3.cubin", b"new")]:
        (d / name).write_bytes(body)
    (a / "x.2.cubin.txt").write_text(listing({"wide": LOOP}))
    (b / "y.3.cubin.txt").write_text(listing({"wide": LOOP[:3] + [LOOP[4], LOOP[3]] + LOOP[5:]}))
    monkeypatch.setenv("NVDISASM", fake_nvdisasm(tmp_path))
    assert sass_diff.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "1 identical; 1 of A's 2 and 1 of B's 2 differ" in out
    assert "1 with other instructions" in out and "       8      8      2  wide" in out
    assert sass_diff.main([str(a), str(b), "--span", "HMUL2"]) == 1
    assert "3      2      1  wide" in capsys.readouterr().out  # B's span starts after its HMMA
    assert sass_diff.main([str(a), str(a)]) == 0  # identical sets: no disassembly needed
    assert "2 identical; 0 of A's 2 and 0 of B's 2 differ" in capsys.readouterr().out


def test_bad_input(tmp_path, monkeypatch):
    with pytest.raises(SystemExit, match="no such library or folder"):
        sass_diff.main([str(tmp_path / "none.so"), str(tmp_path)])
    with pytest.raises(SystemExit, match="no cubins"):
        sass_diff.main([str(tmp_path), str(tmp_path)])
    (tmp_path / "lib.so").write_bytes(b"\x7fELF")
    monkeypatch.setenv("CUOBJDUMP", str(tmp_path / "missing"))
    monkeypatch.setenv("PATH", "")
    with pytest.raises(SystemExit, match="no cuobjdump"):
        sass_diff.main([str(tmp_path / "lib.so"), str(tmp_path / "lib.so")])
