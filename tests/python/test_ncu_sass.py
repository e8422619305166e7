"""bench/quant/ncu_sass.py on a made-up ncu source page: opcodes, counts per unit, samples, bad input."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "quant"))
import ncu_sass  # noqa: E402

HDR = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
       "Instructions Executed", "stall_long_sb", "stall_wait", "stall_long_sb (Not Issued)"]


def write(path, rows, hdr=HDR):
    q = lambda v: '"' + str(v) + '"'
    with open(path, "w") as f:
        f.write('"Kernel Name","void k<0>(P)"\n')  # ncu's line above the header
        f.write(",".join(q(h) for h in hdr) + "\n")
        for r in rows:
            f.write(",".join(q(v) for v in r) + "\n")


def test_opcodes_counts_and_samples(tmp_path, capsys):
    p = tmp_path / "k.csv"
    write(p, [["0x10", "      @!P1  BRA 0x40", 30, 30, 40, 28, 2, 28],
              ["0x20", "HMMA.16816.F32.BF16 R4, R8, R12, RZ", 6, 1, 80, 0, 6, 0],
              ["0x30", "@P0 HMMA.16816.F32.BF16 R4, R8, R12, R4", 4, 2, 80, 1, 3, 1],
              ["0x40", "@!UPT UIADD3 UR4, UR4, 0x1, URZ", 0, 0, "-", 0, 0, 0]])
    rows, reasons = ncu_sass.load(p)
    assert reasons == ["stall_long_sb", "stall_wait"]  # the not-issued columns are not reasons of their own
    assert [ncu_sass.opcode(r["Source"]) for r in rows] == ["BRA", "HMMA", "HMMA", "UIADD3"]
    ex, sm, rs = ncu_sass.summary(rows, reasons)
    assert ex == {"BRA": 40, "HMMA": 160, "UIADD3": 0}
    assert sm["BRA"] == 30 and sm["HMMA"] == 10
    assert rs == {"long_sb": 29, "wait": 11}
    assert ncu_sass.main([str(p), "--per", "10", "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "20.0 warp instructions per unit, 40 stall samples" in out
    assert "HMMA         16.0       80.0      25.0" in out
    assert "BRA           4.0       20.0      75.0" in out
    assert "long_sb 72.5 %, wait 27.5 %" in out
    assert "30  @!P1  BRA 0x40" in out and "long_sb 28 wait 2" in out


def test_bad_input_is_named(tmp_path):
    p = tmp_path / "details.csv"
    p.write_text('"ID","Metric Name"\n"0","Duration"\n')
    with pytest.raises(SystemExit, match="no 'Address' header"):
        ncu_sass.load(p)
    q = tmp_path / "nosamples.csv"
    write(q, [["0x10", "NOP", 5]], hdr=["Address", "Source", "Instructions Executed"])
    with pytest.raises(SystemExit, match="SourceCounters"):
        ncu_sass.load(q)


def test_a_page_without_counts_prints_zero_shares(tmp_path, capsys):
    p = tmp_path / "empty.csv"
    write(p, [["0x10", "NOP", "-", "-", "-", 0, 0, 0]])
    assert ncu_sass.main([str(p)]) == 0
    assert "0.0 warp instructions per unit, 0 stall samples" in capsys.readouterr().out
