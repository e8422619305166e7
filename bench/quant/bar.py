"""Issue 3's decode bar, written once for the bench scripts: the weight shapes (N, K) it names. bench_fp4.py runs
them by default, bar_status.py reports on them; no torch here, so that CPU-side scripts can import it."""

SHAPES = ((4096, 4096), (4096, 14336), (14336, 4096), (8192, 8192))
