"""bench/quant/stage_fit.py on made-up benchmark runs: the stage count by GX, the fit, medians over runs."""

import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "quant"))
import stage_fit  # noqa: E402


def test_stages_follow_the_wide_kernels_row_blocks():
    assert stage_fit.stages(4096, 14336) == (2, 128, 28)  # 256 tiles: GX 2, 128 CTAs, 14 slices each
    assert stage_fit.stages(8192, 8192) == (4, 128, 32)
    assert stage_fit.stages(14336, 4096) == (7, 128, 28)
    assert stage_fit.stages(4096, 4160) == (2, 128, 10)  # a last slice of one chunk counts


def test_fit_recovers_a_line_and_main_reports_it(tmp_path, capsys):
    # T = 1.5 + 0.25 S us at N = 8192 (S = 16, 32, 56), bytes 9216 a stage; runs at 0.99, 1.0, 1.01 of T
    paths = []
    for i, f in enumerate((0.99, 1.0, 1.01)):
        gemm = []
        for k in (4096, 8192, 14336):
            _, ctas, s = stage_fit.stages(8192, k)
            us = (1.5 + 0.25 * s) * f
            pct = ctas * s * 9216 / (us * 1e-6) / 4.0e12 * 100
            gemm.append({"N": 8192, "K": k, "M": 1, "nvfp4": {"us": us, "pct_read": pct}})
        p = tmp_path / f"r{i}.json"
        p.write_text(json.dumps({"read_TBps": 4.0, "gemm": gemm}))
        paths.append(str(p))
    med, tb = stage_fit.load(paths)
    assert tb == 4.0 and math.isclose(med[(8192, 8192, 1, "nvfp4")][0], 1.5 + 0.25 * 32)  # the middle run
    f0, t = stage_fit.fit([(16, 5.5), (32, 9.5), (56, 15.5)])
    assert math.isclose(f0, 1.5) and math.isclose(t, 0.25)
    assert stage_fit.main(paths) == 0
    out = capsys.readouterr().out.splitlines()
    row = [line for line in out if line.lstrip().startswith("8192")][0]
    # 9216 B x 128 CTAs / 0.25 us = 4.72 TB/s: 118 % of the 4.0 TB/s stream
    assert row.split("|")[2].split() == ["1.50", "0.250", "118.0"]
