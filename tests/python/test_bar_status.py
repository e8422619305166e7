"""bench/quant/bar_status.py on made-up benchmark runs: medians over runs, the bar's cells, the M = 1 speedups."""

import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "quant"))
import bar_status  # noqa: E402


def write(path, stream, rows):
    """rows: {(N, K, M): (torch_us or None, {fmt: (us, pct_read)})}"""
    gemm = []
    for (n, k, m), (torch_us, fmts) in rows.items():
        row = {"N": n, "K": k, "M": m, **{f: {"us": us, "pct_read": p} for f, (us, p) in fmts.items()}}
        if torch_us is not None:
            row["torch_bf16"] = {"us": torch_us}
        gemm.append(row)
    with open(path, "w") as f:
        json.dump({"read_TBps": stream, "gemm": gemm}, f)


def test_status_counts_medians_and_speedups(tmp_path, capsys):
    runs = []
    # three runs: nvfp4 at 8192^2 M = 1 reads 76, 74, 80 % (median 76: met); nf4 there 70, 71, 90 (median 71:
    # under); M = 16 on 4096^2 nvfp4 40 % (under). A non-bar shape and an M > 16 row must not count.
    for i, (a, b, tu) in enumerate([(76.0, 70.0, 30.0), (74.0, 71.0, 33.0), (80.0, 90.0, 31.0)]):
        p = tmp_path / f"r{i}.json"
        write(p, 4.3 + 0.01 * i, {
            (8192, 8192, 1): (tu, {"nvfp4": (10.0, a), "nf4": (11.0, b)}),
            (4096, 4096, 16): (None, {"nvfp4": (5.0, 40.0)}),
            (2048, 8192, 1): (5.0, {"nvfp4": (1.0, 10.0)}),
            (8192, 8192, 1024): (100.0, {"nvfp4": (120.0, 5.0)}),
        })
        runs.append(str(p))
    table, streams = bar_status.cells(runs)
    assert (8192, 8192, 1024) not in table and len(streams) == 3
    rows, (met, total, unmet, slow) = bar_status.status(table, 75.0, 3.0)
    assert [(n, k, m) for n, k, m, _, _ in rows] == [(4096, 4096, 16), (8192, 8192, 1)]  # bar shapes only
    assert (met, total) == (1, 3)
    assert sorted((u[0], u[2], u[3]) for u in unmet) == [(4096, 16, "nvfp4"), (8192, 1, "nf4")]
    by = {(n, m): (vals, xs) for n, k, m, vals, xs in rows}
    vals, xs = by[(8192, 1)]
    assert vals[0] == ("nvfp4", 76.0, False) and vals[2] == ("nf4", 71.0, True)
    assert math.isclose(xs[0], 31.0 / 10.0) and math.isclose(xs[2], 31.0 / 11.0)  # median torch / median vstack
    assert slow == [(8192, 8192, "nf4", 31.0 / 11.0)]  # 2.82x is under 3x; nvfp4's 3.1x is not
    assert bar_status.main(runs) == 0
    out = capsys.readouterr().out
    assert "decode bar: 1 of 3 cells at >= 75 %, 1 M = 1 cells under 3x torch" in out
    assert "71.0*" in out and "76.0 " in out
