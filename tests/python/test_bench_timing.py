"""bench/quant/bench_fp4.py's timing method on a simulated device: the per-call time it reports is the calls'
own, without the cost a graph replay pays once (the host's submission, the graph's start), which the method
before session 28 spread over the replay's R calls."""

import contextlib
import os
import sys
import types

import pytest

PER_CALL_MS = 0.010  # what one captured call costs on the simulated device
START_MS = 0.003  # what a replay costs the device once, on top of its calls
SUBMIT_MS = 0.007  # the host's submission of a replay, seen by events only when the stream was idle


class FakeDevice:
    """A clock (ms) that graph replays, spin kernels and eager calls advance."""

    def __init__(self):
        self.now, self.busy, self.capturing, self.calls = 0.0, False, None, 0

    def call(self):  # one "kernel": counted into a graph being captured, else run at once
        self.calls += 1
        if self.capturing is not None:
            self.capturing.n += 1
        else:
            self.now += PER_CALL_MS


def fake_torch(dev):
    cuda = types.SimpleNamespace()

    class Event:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            self.t = dev.now

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return other.t - self.t

    class CUDAGraph:
        def __init__(self):
            self.n = 0

        def replay(self):
            # after a spin kernel the submission overlaps it; on an idle stream the events see it
            dev.now += (0.0 if dev.busy else SUBMIT_MS) + START_MS + self.n * PER_CALL_MS
            dev.busy = False

    class Stream:
        def wait_stream(self, other):
            pass

    @contextlib.contextmanager
    def graph(g):
        dev.capturing = g
        yield
        dev.capturing = None

    def sleep(cycles):
        dev.now += cycles * 1e-6
        dev.busy = True

    cuda.Event, cuda.CUDAGraph, cuda.Stream, cuda.graph, cuda._sleep = Event, CUDAGraph, Stream, graph, sleep
    cuda.synchronize = lambda: None
    cuda.current_stream = lambda: Stream()
    cuda.stream = lambda s: contextlib.nullcontext()
    return types.SimpleNamespace(cuda=cuda, bfloat16="bf16", float16="f16", float32="f32")


@pytest.fixture
def bench(monkeypatch):
    dev = FakeDevice()
    vstack = types.ModuleType("vstack")
    vstack.fp4 = types.ModuleType("vstack.fp4")
    monkeypatch.setitem(sys.modules, "torch", fake_torch(dev))
    monkeypatch.setitem(sys.modules, "vstack", vstack)
    monkeypatch.setitem(sys.modules, "vstack.fp4", vstack.fp4)
    monkeypatch.syspath_prepend(os.path.join(os.path.dirname(__file__), "..", "..", "bench", "quant"))
    monkeypatch.delitem(sys.modules, "bench_fp4", raising=False)
    import bench_fp4

    return bench_fp4, dev


@pytest.mark.parametrize("copies", [1, 9, 32])
def test_graph_time_is_the_calls_own_cost(bench, copies):
    bench_fp4, dev = bench
    seen = []
    fns = [(lambda i=i: (seen.append(i), dev.call())) for i in range(copies)]
    t = bench_fp4.graph_time(fns, inner=max(copies, 8))
    assert t == pytest.approx(PER_CALL_MS * 1e-3, rel=1e-9)
    assert set(seen) == set(range(copies))  # every copy was called


def test_the_old_method_spread_the_replays_cost(bench):
    bench_fp4, dev = bench
    g = bench_fp4.capture_graph([dev.call], 9)
    old = bench_fp4.replay_time(g, spin=False) / 9
    assert old == pytest.approx((PER_CALL_MS + (SUBMIT_MS + START_MS) / 9) * 1e-3, rel=1e-9)
    assert bench_fp4.replay_time(g) / 9 == pytest.approx((PER_CALL_MS + START_MS / 9) * 1e-3, rel=1e-9)


def test_timing_probe_four_ways(bench, capsys):
    _, dev = bench
    sys.modules.pop("timing_probe", None)
    import timing_probe

    r = timing_probe.four_ways([dev.call, dev.call], 9)
    assert r["A"] == pytest.approx((PER_CALL_MS + (SUBMIT_MS + START_MS) / 9) * 1e-3, rel=1e-9)
    assert r["B"] == pytest.approx((PER_CALL_MS + START_MS / 9) * 1e-3, rel=1e-9)
    assert r["C"] == pytest.approx((PER_CALL_MS + START_MS / 72) * 1e-3, rel=1e-9)
    assert r["D"] == pytest.approx(PER_CALL_MS * 1e-3, rel=1e-9)
    timing_probe.row("cell", [dev.call], 9)  # the line: name, R | A B C D (us) | A / D, (A - D) * R (us)
    _, times, tail = capsys.readouterr().out.split("|")
    a, _, _, d = (float(v) for v in times.split())
    ratio, spread = (float(v) for v in tail.split())
    assert d == pytest.approx(PER_CALL_MS * 1e3, abs=0.01)
    assert a == pytest.approx((PER_CALL_MS + (SUBMIT_MS + START_MS) / 9) * 1e3, abs=0.01)
    assert spread == pytest.approx((SUBMIT_MS + START_MS) * 1e3, abs=0.01)
    assert ratio == pytest.approx(a / d, abs=0.001)


def test_copies_exceed_the_l2_flush(bench, monkeypatch):
    bench_fp4, _ = bench
    mib = 1 << 20
    assert bench_fp4.l2_copies(bench_fp4.L2_FLUSH_BYTES) == 2  # never fewer than two
    assert bench_fp4.l2_copies(mib) == bench_fp4.L2_FLUSH_BYTES // mib
    assert bench_fp4.l2_copies(bench_fp4.L2_FLUSH_BYTES // 3 + 1) == 3  # rounded up

    class Tensor:  # a dense weight of 2-byte elements, and an FP4 one, as bench_fp4 copies them
        def __init__(self, numel):
            self.n = numel

        def numel(self):
            return self.n

        def element_size(self):
            return 2

        def clone(self):
            return Tensor(self.n)

    w = Tensor(8 * mib)  # 16 MiB
    assert len(bench_fp4.weight_copies(w)) == bench_fp4.L2_FLUSH_BYTES // (16 * mib)
    monkeypatch.setattr(bench_fp4.fp4, "FP4Tensor", lambda *a: a, raising=False)
    q = types.SimpleNamespace(codes=Tensor(1), scales=Tensor(1), scale2=Tensor(1), fmt=0, layout=1, shape=(8, 64),
                              nbytes=100 * mib)
    copies = bench_fp4.fp4_copies(q)
    assert len(copies) == 3 and all(c[3:] == (0, 1, (8, 64)) for c in copies)
