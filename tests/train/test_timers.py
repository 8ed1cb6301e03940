import math

import numpy as np
import pytest

from myxtts.observe.ops import count_host_syncs
from myxtts.train.timers import StepTimer, shape_key


class FakeTime:
    """A clock the test advances by hand: timings are inputs, so the results are exact."""

    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t

    def advance(self, s):
        self.t += s


def _step(timer, clk, *, wait, compute, other=0.0, shape=(16, 768), frames=1000, samples=16, phases=()):
    """One step: ``phases`` (name, seconds) split the compute time when given."""
    with timer.data_wait():
        clk.advance(wait)
    with timer.compute(shape):
        for name, sec in phases:
            timer.phase(name)
            clk.advance(sec)
        clk.advance(compute - sum(sec for _, sec in phases))
    clk.advance(other)
    timer.step_done(frames=frames, samples=samples)


def test_input_bound_share_and_throughput():
    clk = FakeTime()
    timer = StepTimer("cpu", frames_per_second=100.0, now=clk)
    for _ in range(10):
        _step(timer, clk, wait=0.03, compute=0.06, other=0.01)
    s = timer.summary()
    assert s["steps"] == 10
    assert math.isclose(s["input_bound_pct"], 30.0) and "data_wait_pct" not in s  # one name per figure
    assert "h2d_pct" not in s  # the loop cannot see the copy: only a profile trace reports it
    assert math.isclose(s["compute_pct"], 60.0) and math.isclose(s["other_pct"], 10.0)
    assert math.isclose(s["step_ms"], 100.0) and s["step_cov_pct"] < 1e-6
    assert math.isclose(s["throughput"]["frames_per_s"], 10000.0)
    assert math.isclose(s["throughput"]["samples_per_s"], 160.0)
    assert math.isclose(s["throughput"]["audio_s_per_s"], 100.0)


def test_warmup_and_first_step_per_shape_are_kept_out():
    clk = FakeTime()
    timer = StepTimer("cpu", warmup_steps=2, now=clk)
    _step(timer, clk, wait=5.0, compute=30.0)                  # compile of shape A, warm-up
    _step(timer, clk, wait=0.0, compute=0.1)                   # warm-up
    _step(timer, clk, wait=0.0, compute=20.0, shape=(32, 384))  # first of shape B: compiles
    for c in (0.1, 0.1, 0.3, 0.1, 0.3):
        _step(timer, clk, wait=0.0, compute=c)
    for _ in range(3):
        _step(timer, clk, wait=0.0, compute=0.2, shape=(32, 384))
    s = timer.summary()
    assert s["steps"] == 9 and s["input_bound_pct"] == 0.0
    a, b = s["step_by_shape"]["16x768"], s["step_by_shape"]["32x384"]
    assert a["n"] == 5 and math.isclose(a["mean_ms"], 180.0) and a["first_ms"] == pytest.approx(30000.0)
    ms = np.array([100, 100, 300, 100, 300.0])
    assert a["cov_pct"] == pytest.approx(ms.std() / ms.mean() * 100)
    assert b["n"] == 3 and b["cov_pct"] < 1e-6 and b["first_ms"] == pytest.approx(20000.0)


def test_window_reports_only_the_steps_since_the_last_call():
    clk = FakeTime()
    timer = StepTimer("cpu", now=clk)
    for _ in range(4):
        _step(timer, clk, wait=0.05, compute=0.05)
    assert timer.window()["steps"] == 4
    for _ in range(2):
        _step(timer, clk, wait=0.0, compute=0.1)
    w = timer.window()
    assert w["steps"] == 2 and w["input_bound_pct"] == 0.0
    assert timer.summary()["steps"] == 6 and math.isclose(timer.summary()["input_bound_pct"], 100 / 3)


def test_no_steps_gives_none_not_zero():
    s = StepTimer("cpu").summary()
    assert s["steps"] == 0 and s["input_bound_pct"] is None and s["step_ms"] is None and s["throughput"] == {}


class LazyClock:
    """Device events that only complete when the test says so: flush() must not block on them."""

    def __init__(self):
        self.t, self.done, self.waits = 0.0, 0.0, 0

    def mark(self):
        self.t += 0.01
        return self.t

    def ready(self, m):
        return m <= self.done

    def wait(self, m):
        self.waits += 1
        self.done = max(self.done, m)

    def ms(self, a, b):
        return (b - a) * 1000

    def release(self, m):
        pass


def test_events_are_read_lazily_without_syncing():
    timer = StepTimer("cpu")
    timer._clock = clock = LazyClock()  # stands in for CUDA events
    for _ in range(3):
        with timer.compute((8, 64)):
            pass
        timer.step_done()
    w = timer.window()
    assert clock.waits == 0 and w["step_by_shape"] == {}  # nothing finished on the "GPU" yet
    clock.done = clock.t
    timer.window()
    assert clock.waits == 0 and timer._pending == type(timer._pending)()
    assert timer.summary()["step_by_shape"]["8x64"]["n"] == 2  # first one is the compile step


def test_shape_key():
    assert shape_key((32, 512, 80)) == "32x512x80" and shape_key("a") == "a"


def test_sync_counter_says_why_it_cannot_count_on_cpu():
    import torch
    if torch.cuda.is_available():
        pytest.skip("CPU-only behaviour")
    with count_host_syncs() as n:
        torch.ones(3).sum().item()
    assert n.count is None and n.reason == "no CUDA device"


def test_phases_split_the_step_when_the_timer_is_a_hook():
    clk = FakeTime()
    timer = StepTimer("cpu", now=clk)
    for _ in range(3):
        _step(timer, clk, wait=0.0, compute=0.1,
              phases=(("forward", 0.03), ("backward", 0.05), ("optimizer", 0.02)))
    ph = timer.summary()["phase_ms"]
    assert ph == pytest.approx({"forward": 30.0, "backward": 50.0, "optimizer": 20.0})


def test_full_speed_is_the_end_of_the_first_step_of_a_fast_run_of_steps():
    """Per shape, 'fast' is within 10 % of the shape's median after warm-up; one fast step
    between slow ones (a compile of another shape) is not full speed."""
    clk = FakeTime()
    timer = StepTimer("cpu", warmup_steps=4, now=clk)
    assert timer.origin == 100.0
    a, b = (16, 768), (32, 384)
    plan = [(a, 30.0), (b, 0.2), (a, 0.1), (b, 20.0)] + [(a, 0.1), (b, 0.2)] * 6
    for shape, sec in plan:
        _step(timer, clk, wait=0.0, compute=sec, shape=shape)
    ends = [t for t, *_ in timer.history]
    assert timer.full_speed_s() == pytest.approx(ends[4])  # the run after the compile of b
    assert timer.summary()["time_to_full_speed_s"] == timer.full_speed_s()

    slow = StepTimer("cpu", warmup_steps=2, now=clk)
    _step(slow, clk, wait=0.0, compute=5.0)
    _step(slow, clk, wait=0.0, compute=5.0)
    assert slow.full_speed_s() is None  # nothing after warm-up: no median to be near


class FakeGpu:
    """A device queue on a FakeTime host clock: a mark is the time the queue reaches it, a step's
    work runs after the work before it, and the host blocks once it is ``depth`` seconds ahead
    (CUDA's launch queue is finite)."""

    def __init__(self, clk, depth=0.2):
        self.clk, self.depth, self.busy_until = clk, depth, clk.t

    def __call__(self, device):  # stands in for the _CudaClock class
        return self

    def mark(self):
        return max(self.clk.t, self.busy_until)

    def ready(self, m):
        return m <= self.clk.t

    def wait(self, m):
        self.clk.t = max(self.clk.t, m)

    def ms(self, a, b):
        return (b - a) * 1000.0

    def release(self, m):
        pass

    def run(self, seconds):
        self.busy_until = max(self.clk.t, self.busy_until) + seconds
        self.clk.t = max(self.clk.t, self.busy_until - self.depth)


@pytest.mark.parametrize("gpu_s, wait_s, idle_pct", [(0.070, 0.001, 0.0), (0.002, 0.010, 81.8)])
def test_input_bound_on_a_gpu_is_the_wait_the_device_sat_idle_through(monkeypatch, gpu_s, wait_s, idle_pct):
    """A host ahead of the GPU waits for data while the GPU still computes: 1.4 % host wait, 0 %
    input-bound. A GPU done before the next batch arrives idles through the wait: of each 11 ms
    step (1 ms launching, 10 ms waiting), the device worked 2 ms and idled 9 of the 10 waited."""
    from myxtts.train import timers

    clk = FakeTime()
    gpu = FakeGpu(clk)
    monkeypatch.setattr(timers, "_CudaClock", gpu)
    timer = StepTimer("cuda:0", warmup_steps=5, now=clk)
    for _ in range(60):
        with timer.data_wait():
            clk.advance(wait_s)
        with timer.compute((16, 768)):
            gpu.run(gpu_s)
            clk.advance(0.001)  # launching
        timer.step_done(frames=1000, samples=16)
    s = timer.summary()
    assert s["input_bound_pct"] == pytest.approx(idle_pct, abs=0.1)
    assert s["host_wait_pct"] == pytest.approx(100 * wait_s / s["step_ms"] * 1000, rel=1e-3)
    assert s["host_wait_pct"] > 1.0


def test_collective_wait_is_the_share_of_the_step_spent_in_the_all_reduce():
    clk = FakeTime()
    timer = StepTimer("cpu", now=clk)
    _step(timer, clk, wait=0.01, compute=0.08, other=0.01)
    assert timer.window()["collective_wait_pct"] is None  # one process: no all-reduce to wait for
    # stands in for train.collectives.CollectiveTimer: each step's last 20 ms were the wait
    timer.collectives = type("Waited", (), {"close": lambda self: (clk.t - 0.02, clk.t)})()
    for _ in range(4):
        _step(timer, clk, wait=0.01, compute=0.08, other=0.01)
    w = timer.window()
    assert math.isclose(w["collective_wait_pct"], 20.0) and math.isclose(w["compute_pct"], 80.0)
    assert w["phase_ms"] == {}  # not a phase of the step: a part of it
