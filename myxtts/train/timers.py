"""Step timing for the training loop: where each step's wall time goes, without host syncs.

The question users of every TTS trainer ask is "is it the loader or the GPU?" (docs/design.md).
``StepTimer`` answers it with three intervals per step and the wall time between steps:

* data wait  -- host time blocked in ``next(loader)``: the GPU may starve during it;
* h2d        -- the host-to-device copy that is *not* overlapped. On CUDA it is timed with
                events on the compute stream, so it measures how long that stream stalled on the
                prefetcher's copy (or on a synchronous copy), not how long the host was busy;
* compute    -- CUDA-event time of the step (forward, loss, backward, optimizer), keyed by the
                batch shape, because a compiled step has one cost per shape and oscillation is
                defined as the CoV of step time *within* one shape.

input-bound % = (data wait + h2d) / wall (docs/design.md, "How we measure"). Compute-share is reported too; what is
left (``other_pct``) is host time outside all three (logging, checkpoints, Python between steps).

CUDA events are recorded every step but read lazily: ``flush()`` (called by ``window()`` and
``summary()``, i.e. on logging steps) only reads events the GPU has already passed
(``Event.query()``), so the timer never adds a host sync; ``summary()`` waits for the rest once.

Usage (``train.loop.Loop`` keeps the first step of each bucket shape out of the statistics)::

    timer = StepTimer(device, warmup_steps=len(run.shapes), frames_per_second=sr / hop)
    for step in range(max_steps):
        with timer.data_wait():
            batch = next(batches)
        with timer.h2d():
            batch = prefetcher.wait(batch)          # or batch.to(device, non_blocking=True)
        with timer.compute(batch.mel.shape):
            loss = train_step(batch)
        timer.step_done(frames=batch.n_frames, samples=batch.size)
        if step % log_every == 0:
            w = timer.window()                      # stats since the previous window() call
    run.update(timer.summary())                     # keys read by diagnose() and write_report()
"""
from __future__ import annotations

import math
import time
import warnings
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

RESERVOIR = 512  # recent compute times kept per shape, for median/p95


def shape_key(shape) -> str:
    """``(32, 512, 80)`` -> ``"32x512x80"``: JSON-friendly and readable in reports."""
    if isinstance(shape, str):
        return shape
    return "x".join(str(int(s)) for s in shape)


class _HostClock:
    """perf_counter "events": already complete when taken (CPU, MPS, or tests with fake time)."""

    def __init__(self, now):
        self.now = now

    def mark(self):
        return self.now()

    def ready(self, m) -> bool:
        return True

    def wait(self, m) -> None:
        pass

    def ms(self, a, b) -> float:
        return (b - a) * 1000.0

    def release(self, m) -> None:
        pass


class _CudaClock:
    """CUDA events on the current stream, recycled through a pool (creating one costs a few µs)."""

    def __init__(self, device):
        import torch
        self.torch, self.device, self.pool = torch, device, []

    def mark(self):
        ev = self.pool.pop() if self.pool else self.torch.cuda.Event(enable_timing=True)
        ev.record(self.torch.cuda.current_stream(self.device))
        return ev

    def ready(self, ev) -> bool:
        return ev.query()

    def wait(self, ev) -> None:
        ev.synchronize()

    def ms(self, a, b) -> float:
        return a.elapsed_time(b)

    def release(self, ev) -> None:
        self.pool.append(ev)


@dataclass
class _Welford:
    """Running mean/variance: a run of a million steps costs three floats, not a list."""
    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, x: float) -> None:
        self.n += 1
        d = x - self.mean
        self.mean += d / self.n
        self.m2 += d * (x - self.mean)

    @property
    def cov_pct(self) -> float:
        if self.n < 2 or self.mean <= 0:
            return 0.0
        return math.sqrt(self.m2 / self.n) / self.mean * 100.0


@dataclass
class _Shape:
    times: _Welford = field(default_factory=_Welford)
    recent: deque = field(default_factory=lambda: deque(maxlen=RESERVOIR))


@dataclass
class _Acc:
    steps: int = 0
    wall_s: float = 0.0
    data_wait_s: float = 0.0
    h2d_ms: float = 0.0
    compute_ms: float = 0.0
    frames: float = 0.0
    samples: float = 0.0
    wall: _Welford = field(default_factory=_Welford)
    shapes: dict = field(default_factory=dict)


class StepTimer:
    def __init__(self, device="cpu", *, warmup_steps: int = 0, frames_per_second: float | None = None,
                 now=time.perf_counter):
        dev = str(device)
        self.on_cuda = dev.startswith("cuda")
        self._clock = _CudaClock(device) if self.on_cuda else _HostClock(now)
        self._now = now
        self.warmup_steps = warmup_steps
        self.frames_per_second = frames_per_second
        self.step = 0                       # steps completed (step_done calls)
        self._last = None                   # host time of the previous step boundary
        self._wait_s = 0.0                  # data wait of the step in progress
        self._open: list = []               # (kind, shape, start, end, first) of the step in progress
        self._pending: deque = deque()      # (counted, kind, shape, start, end, first), in stream order
        self._seen: set = set()
        self.first_ms: dict[str, float] = {}  # first (compiling) step per shape
        self._total, self._win = _Acc(), _Acc()

    # ------------------------------------------------------------------------ the three phases
    def _begin(self) -> None:
        if self._last is None:
            self._last = self._now()

    @contextmanager
    def data_wait(self):
        self._begin()
        t = self._now()
        try:
            yield
        finally:
            self._wait_s += self._now() - t

    @contextmanager
    def h2d(self):
        self._begin()
        a = self._clock.mark()
        try:
            yield
        finally:
            self._open.append(("h2d", None, a, self._clock.mark(), False))

    @contextmanager
    def compute(self, shape=()):
        self._begin()
        key = shape_key(shape)
        first = key not in self._seen
        self._seen.add(key)
        a = self._clock.mark()
        try:
            yield
        finally:
            self._open.append(("compute", key, a, self._clock.mark(), first))

    def restart(self) -> None:
        """Leave the time since the last step (a periodic evaluation) out of the next step's."""
        self._last = None

    def step_done(self, frames: float = 0, samples: float = 0) -> None:
        """Close one optimizer step: its wall time runs from the previous step_done (or the first
        phase entered) to now. Steps before ``warmup_steps`` only feed ``first_ms``."""
        self._begin()
        t = self._now()
        wall, self._last = t - self._last, t
        counted = self.step >= self.warmup_steps
        if counted:
            for acc in (self._total, self._win):
                acc.steps += 1
                acc.wall_s += wall
                acc.data_wait_s += self._wait_s
                acc.frames += frames
                acc.samples += samples
                acc.wall.add(wall * 1000.0)
        self._pending.extend((counted, *iv) for iv in self._open)
        self._open, self._wait_s = [], 0.0
        self.step += 1

    # ---------------------------------------------------------------------------- reading
    def flush(self, wait: bool = False) -> None:
        """Read the device intervals the GPU has finished; with ``wait`` the rest too (one sync)."""
        c = self._clock
        while self._pending:
            counted, kind, key, a, b, first = self._pending[0]
            if not c.ready(b):
                if not wait:
                    break  # events complete in stream order: later ones are not ready either
                c.wait(b)
            self._pending.popleft()
            ms = c.ms(a, b)
            c.release(a)
            c.release(b)
            if first:
                self.first_ms[key] = ms  # includes compilation; kept out of the shape statistics
            if not counted:
                continue
            for acc in (self._total, self._win):
                if kind == "h2d":
                    acc.h2d_ms += ms
                else:
                    acc.compute_ms += ms
                    if not first:
                        sh = acc.shapes.setdefault(key, _Shape())
                        sh.times.add(ms)
                        sh.recent.append(ms)

    def window(self) -> dict:
        """Statistics since the previous ``window()`` call, for the progress line (no sync)."""
        self.flush(wait=False)
        out, self._win = self._stats(self._win), _Acc()
        return out

    def summary(self) -> dict:
        """Statistics of all steps after warm-up (waits once for outstanding events)."""
        self.flush(wait=True)
        return self._stats(self._total)

    def _stats(self, acc: _Acc) -> dict:
        wall_ms = acc.wall_s * 1000.0
        pct = (lambda x: 100.0 * x / wall_ms) if wall_ms > 0 else (lambda x: None)
        wait_ms = acc.data_wait_s * 1000.0
        shapes = {}
        for key, sh in sorted(acc.shapes.items()):
            rec = np.asarray(sh.recent)
            shapes[key] = {"n": sh.times.n, "mean_ms": sh.times.mean, "cov_pct": sh.times.cov_pct,
                           "p50_ms": float(np.median(rec)), "p95_ms": float(np.percentile(rec, 95)),
                           "first_ms": self.first_ms.get(key)}
        wall_s = acc.wall_s
        tput = {}
        if wall_s > 0:
            tput = {"frames_per_s": acc.frames / wall_s, "samples_per_s": acc.samples / wall_s}
            if self.frames_per_second:
                tput["audio_s_per_s"] = acc.frames / self.frames_per_second / wall_s
        ib = pct(wait_ms + acc.h2d_ms)
        comp = pct(acc.compute_ms)
        return {
            "steps": acc.steps,
            "wall_s": wall_s,
            "step_ms": acc.wall.mean if acc.steps else None,
            "step_cov_pct": acc.wall.cov_pct,
            "input_bound_pct": ib,
            "data_wait_pct": pct(wait_ms),
            "h2d_pct": pct(acc.h2d_ms),
            "compute_pct": comp,
            "other_pct": None if ib is None else max(0.0, 100.0 - ib - comp),
            "step_by_shape": shapes,
            "throughput": tput,
            "timing": "cuda-events" if self.on_cuda else "host perf_counter",
        }


class SyncCount:
    """Result of ``count_host_syncs``: ``count`` is None where it cannot be measured (no CUDA)."""

    def __init__(self):
        self.count: int | None = None
        self.reason = ""


@contextmanager
def count_host_syncs():
    """Count synchronising CUDA calls (``.item()``, ``.cpu()``, ``nonzero`` ...) inside the block.

    Uses torch's sync debug mode, which warns on every synchronising call; for profile/doctor
    runs of a few steps, not for the training loop (the warning path is slow).
    """
    res = SyncCount()
    import torch
    if not torch.cuda.is_available():
        res.reason = "no CUDA device"
        yield res
        return
    prev = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield res
        finally:
            torch.cuda.set_sync_debug_mode(prev)
            res.count = sum("synchroniz" in str(w.message) for w in caught)
