"""bench/quant/compare.py on made-up benchmark files: medians, per-run ratios, geometric means."""

import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "quant"))
import compare  # noqa: E402


def write(folder, name, cells):
    rows = [{"N": n, "K": k, "M": m, **{fmt: {"us": us, "pct_read": 100.0 / us} for fmt, us in fmts.items()}}
            for (n, k, m), fmts in cells.items()]
    with open(os.path.join(folder, name + ".json"), "w") as f:
        json.dump({"gemm": rows}, f)


def test_medians_ratios_and_geomean(tmp_path):
    # base: 10, 12, 11 us; new: 9, 9, 30 us (one outlier run) on one cell; on a second, new takes half
    # of base's time in every run
    for run, (b, n) in enumerate([(10.0, 9.0), (12.0, 9.0), (11.0, 30.0)], start=1):
        write(tmp_path, f"base_{run}", {(8192, 8192, 1): {"nvfp4": b}, (4096, 4096, 16): {"nf4": 2 * b}})
        write(tmp_path, f"new_{run}", {(8192, 8192, 1): {"nvfp4": n}, (4096, 4096, 16): {"nf4": b}})
    cells = compare.load(str(tmp_path))
    assert set(cells) == {(8192, 8192, 1, "nvfp4"), (4096, 4096, 16, "nf4")}
    rows, geo = compare.compare(cells, ["base", "new"])
    by_key = {key: (med, ratios) for key, med, ratios in rows}
    med, ratios = by_key[(8192, 8192, 1, "nvfp4")]
    assert med["base"][0] == 11.0 and med["new"][0] == 9.0  # medians, the outlier ignored
    ratio, lo, hi = ratios["new"]
    assert math.isclose(ratio, 9.0 / 11.0)
    assert math.isclose(lo, 9.0 / 12.0) and math.isclose(hi, 30.0 / 11.0)  # run i against run i
    _, ratios2 = by_key[(4096, 4096, 16, "nf4")]
    assert math.isclose(ratios2["new"][0], 0.5)
    g, n = geo["new"]
    assert n == 2 and math.isclose(g, math.sqrt(9.0 / 11.0 * 0.5))


def test_missing_reference_is_an_error(tmp_path, capsys):
    write(tmp_path, "new_1", {(64, 64, 1): {"nvfp4": 1.0}})
    assert compare.main([str(tmp_path), "--order", "base,new"]) == 1
    assert "no runs of the reference 'base'" in capsys.readouterr().err


def test_main_prints_a_row_per_cell(tmp_path, capsys):
    for run in (1, 2, 3):
        write(tmp_path, f"a_{run}", {(64, 128, 8): {"mxfp4": 2.0, "nf4_dq": 4.0}})
        write(tmp_path, f"b_{run}", {(64, 128, 8): {"mxfp4": 1.0, "nf4_dq": 4.0}})
    assert compare.main([str(tmp_path), "--order", "a,b"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 + 2 + 1  # header, two cells, one geometric mean
    assert "0.500" in out[1] or "0.500" in out[2]
    assert out[-1].startswith("geometric mean b / a: 0.7071 over 2 cells")


def test_convert_cells_in_a_second_table(tmp_path, capsys):
    # copy 2 TB/s; base quantizes nf4_dq in 80 us at 1600 GB/s (80 % of the copy), new in 72 us at 1778
    for run in (1, 2, 3):
        for variant, us in (("base", 80.0), ("new", 72.0)):
            conv = {"nf4_dq": {"quantize_us": us, "quantize_GBps": 128e3 / us,
                               "quantize_linear_us": 70.0, "quantize_linear_GBps": 128e3 / 70.0,
                               "dequantize_us": 60.0, "dequantize_GBps": 128e3 / 60.0}}
            with open(os.path.join(tmp_path, f"{variant}_{run}.json"), "w") as f:
                json.dump({"copy_TBps": 2.0, "convert": conv, "gemm": []}, f)
    cells = compare.load(str(tmp_path), "convert")
    assert set(cells) == {(k, "nf4_dq") for k in compare.CONVERT_KINDS}
    rows, geo = compare.compare(cells, ["base", "new"])
    by_key = {key: (med, ratios) for key, med, ratios in rows}
    med, ratios = by_key[("quantize", "nf4_dq")]
    assert med["base"] == (80.0, 80.0) and math.isclose(med["new"][1], 100 * 128e3 / 72.0 / 2e3)
    assert math.isclose(ratios["new"][0], 0.9)
    assert math.isclose(by_key[("dequantize", "nf4_dq")][1]["new"][0], 1.0)
    assert math.isclose(geo["new"][0], 0.9 ** (1 / 3)) and geo["new"][1] == 3
    assert compare.load(str(tmp_path)) == {}  # no GEMM cells
    assert compare.main([str(tmp_path), "--order", "base,new"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 + 3 + 1  # the convert table only: header, three kernels, one geometric mean
    quant = [line for line in out if line.startswith("quantize ")]
    assert len(quant) == 1 and "0.900" in quant[0] and "80.0" in quant[0]
