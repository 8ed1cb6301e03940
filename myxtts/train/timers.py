"""Step timing: the one definition of a timed step, of warm-up and of time to full speed.

Every command that times training steps (the trainer's ``fit``, ``profile``, ``doctor``,
``tune`` and ``bench train``) runs ``train.loop.Loop`` with a ``StepTimer``; nothing else times
a step. Per step it records:

* data wait  -- host time blocked in ``next(batches)``: the GPU may starve during it;
* input idle -- of that wait, the time the device had no work: the gap on the device between
                the previous step's end and this step's start (CUDA events), capped at the wait.
                A host that runs ahead of the GPU waits for data while the GPU still computes
                the step before, and that wait costs nothing;
* compute    -- device time of the step (forward, loss, backward, optimizer): CUDA events on the
                compute stream, keyed by the batch shape (B, Tt, Tm, as the sampler names it),
                because a compiled step has one cost per shape and oscillation is the CoV of
                step time *within* one shape;
* phases     -- only when the timer is one of the step's hooks (``TrainStep.hooks``): device
                time of forward(+loss), backward(+clipping) and optimizer(+schedule) within it;
* wall       -- host time from one ``step_done`` to the next;
* collective -- under DDP, of the step, the time this rank waited for the gradient all-reduce
                after handing it its last gradients (``train.collectives``, docs/design.md).

input-bound % = input idle / wall, and host wait % = data wait / wall (docs/design.md, "How we
measure"); on a CPU, or on a GPU the host does not run ahead of, they are equal. The host-to-device copy is
overlapped by the prefetcher and only a profiler trace can see what of it is exposed, so
``myxtts profile`` adds that share and nothing here reports it. ``other_pct`` is what is left
(logging, checkpoints, Python between steps).

Warm-up: the first ``warmup_steps`` steps and the first step of every shape (it compiles) are
kept out of the statistics; ``first_ms`` keeps the latter per shape. Time to full speed: the
seconds from ``origin`` to the end of the first step from which every later step runs within
``FULL_SPEED_WITHIN`` of its shape's median step time after warm-up.

CUDA events are recorded every step but read lazily: ``flush()`` (called by ``window()`` and
``summary()``, i.e. on logging steps) only reads events the GPU has already passed
(``Event.query()``), so the timer never adds a host sync; ``summary()`` waits for the rest once.
"""
from __future__ import annotations

import math
import os
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

RESERVOIR = 512          # recent compute times kept per shape, for median/p95
FULL_SPEED_WITHIN = 0.10  # a step this close to its shape's steady-state time runs at full speed
FULL_SPEED_RUN = 8        # ... and this many in a row: one fast step between compiles is not it


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

    def latest(self, marks: list):
        return max(marks)  # gloo's threads may finish a rank's all-reduces out of order


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

    def latest(self, marks: list):
        for ev in marks[:-1]:  # NCCL runs a rank's all-reduces in order on one stream
            self.release(ev)
        return marks[-1]


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
    input_idle_s: float = 0.0
    compute_ms: float = 0.0
    collective_ms: float = 0.0
    phase_ms: dict = field(default_factory=dict)
    frames: float = 0.0
    samples: float = 0.0
    wall: _Welford = field(default_factory=_Welford)
    shapes: dict = field(default_factory=dict)


def process_age_s() -> float | None:
    """Seconds since this process started (Linux: /proc), None where that cannot be read."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class StepTimer:
    """Times the steps of one ``Loop``: see the module docstring for what each figure means."""

    HISTORY = 4096  # steps kept for time to full speed; full speed comes long before

    def __init__(self, device="cpu", *, warmup_steps: int = 0, frames_per_second: float | None = None,
                 origin: float | None = None, now=time.perf_counter):
        dev = str(device)
        self.on_cuda = dev.startswith("cuda")
        self._clock = _CudaClock(device) if self.on_cuda else _HostClock(now)
        self._now = now
        self.origin = now() if origin is None else origin  # time to full speed counts from here
        # ... and also from the start of the process (imports, building, the batch-size probe)
        age = process_age_s()
        since_origin = time.perf_counter() - self.origin if now is time.perf_counter else 0.0
        self.process_age_at_origin = None if age is None else age - since_origin
        self.warmup_steps = warmup_steps
        self.frames_per_second = frames_per_second
        self.step = 0                       # steps completed (step_done calls)
        self._last = None                   # host time of the previous step boundary
        self._wait_s = 0.0                  # data wait of the step in progress
        self._key = None                    # shape key of the step in progress
        self._phase = None                  # (name, start mark) of the phase in progress
        self._open: list = []               # (kind, shape, start, end, first) of the step in progress
        self._pending: deque = deque()      # (counted, kind, shape, start, end, first), in stream order
        self._prev_end = None               # a mark where the previous step's device work ended
        self._gaps: deque = deque()         # (counted, start, end, wait s): the device before a step
        self._seen: set = set()
        self.first_ms: dict[str, float] = {}  # first (compiling) step per shape
        self.history: list[tuple[float, str, float, bool]] = []  # (end s since origin, shape, wall ms, counted)
        self._total, self._win = _Acc(), _Acc()
        self.collectives = None             # train.collectives.CollectiveTimer, under DDP

    @property
    def clock(self):
        """What the timer marks time with: host time, or CUDA events on the compute stream."""
        return self._clock

    # ------------------------------------------------------------------------ the step's parts
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
    def compute(self, shape=()):
        self._begin()
        key = self._key = shape_key(shape)
        first = key not in self._seen
        self._seen.add(key)
        a = self._clock.mark()
        # the device's gap before this step, with its own marks (the intervals release theirs);
        # with no step before it (the first, or after an evaluation) the device had nothing to do
        gap = (self._prev_end, self._clock.mark()) if self._prev_end is not None else (None, None)
        self._gaps.append((self.step >= self.warmup_steps, *gap, self._wait_s))
        self._prev_end = None
        try:
            yield
        finally:
            self._close_phase()
            self._open.append(("compute", key, a, self._clock.mark(), first))
            self._prev_end = self._clock.mark()

    def phase(self, name: str) -> None:
        """``TrainStep`` hook: a phase of the step (forward, backward, optimizer) starts here and
        lasts until the next one starts or the step ends."""
        self._close_phase()
        self._phase = (name, self._clock.mark())

    def _close_phase(self) -> None:
        if self._phase is not None:
            name, a = self._phase
            self._open.append((name, self._key, a, self._clock.mark(), False))
            self._phase = None

    def restart(self) -> None:
        """Leave the time since the last step (a periodic evaluation) out of the next step's."""
        self._last = None
        if self._prev_end is not None:
            self._clock.release(self._prev_end)
            self._prev_end = None

    def step_done(self, frames: float = 0, samples: float = 0) -> None:
        """Close one optimizer step: its wall time runs from the previous step_done (or the first
        part entered) to now. Steps before ``warmup_steps`` only feed ``first_ms``."""
        self._begin()
        t = self._now()
        wall, self._last = t - self._last, t
        waited = self.collectives.close() if self.collectives is not None else None
        if waited is not None:  # (ready, done) marks of this step's all-reduce
            self._open.append(("collective", self._key, *waited, False))
        counted = self.step >= self.warmup_steps
        if counted:
            for acc in (self._total, self._win):
                acc.steps += 1
                acc.wall_s += wall
                acc.data_wait_s += self._wait_s
                acc.frames += frames
                acc.samples += samples
                acc.wall.add(wall * 1000.0)
        if len(self.history) < self.HISTORY:
            first = any(iv[0] == "compute" and iv[4] for iv in self._open)
            self.history.append((t - self.origin, self._key, wall * 1000.0, counted and not first))
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
                if kind == "collective":
                    acc.collective_ms += ms
                    continue
                if kind != "compute":
                    acc.phase_ms[kind] = acc.phase_ms.get(kind, 0.0) + ms
                    continue
                acc.compute_ms += ms
                if not first:
                    sh = acc.shapes.setdefault(key, _Shape())
                    sh.times.add(ms)
                    sh.recent.append(ms)
        while self._gaps:
            counted, a, b, wait_s = self._gaps[0]
            if b is not None and not c.ready(b):
                if not wait:
                    break
                c.wait(b)
            self._gaps.popleft()
            idle_s = wait_s
            if b is not None:
                idle_s = min(wait_s, max(0.0, c.ms(a, b) / 1000.0))
                c.release(a)
                c.release(b)
            if counted:
                for acc in (self._total, self._win):
                    acc.input_idle_s += idle_s

    def window(self) -> dict:
        """Statistics since the previous ``window()`` call, for the progress line (no sync)."""
        self.flush(wait=False)
        out, self._win = self._stats(self._win), _Acc()
        return out

    def summary(self) -> dict:
        """Statistics of all steps after warm-up (waits once for outstanding events)."""
        self.flush(wait=True)
        full = self.full_speed_s()
        since_start = None if full is None or self.process_age_at_origin is None else full + self.process_age_at_origin
        return {**self._stats(self._total), "time_to_full_speed_s": full,
                "time_to_full_speed_from_process_start_s": since_start}

    def full_speed_s(self) -> float | None:
        """Seconds from ``origin`` to the end of the first step from which ``FULL_SPEED_RUN``
        steps in a row (or all the steps left) ran within ``FULL_SPEED_WITHIN`` of their shape's
        median after warm-up; None before every shape seen has such a median."""
        steady: dict[str, list[float]] = {}
        for _, key, ms, counted in self.history:
            if counted:
                steady.setdefault(key, []).append(ms)
        if not steady or any(key not in steady for _, key, _, _ in self.history):
            return None
        median = {k: float(np.median(v)) for k, v in steady.items()}
        fast = [ms <= (1 + FULL_SPEED_WITHIN) * median[key] for _, key, ms, _ in self.history]
        for i, (end, *_) in enumerate(self.history):
            if all(fast[i:i + FULL_SPEED_RUN]):
                return end
        return None

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
        ib, comp = pct(acc.input_idle_s * 1000.0), pct(acc.compute_ms)
        return {
            "steps": acc.steps,
            "wall_s": wall_s,
            "step_ms": acc.wall.mean if acc.steps else None,
            "step_cov_pct": acc.wall.cov_pct,
            "input_bound_pct": ib,
            "host_wait_pct": pct(wait_ms),
            "compute_pct": comp,
            "other_pct": None if ib is None else max(0.0, 100.0 - ib - comp),
            # inside compute_pct: the step call waits for the all-reduce
            "collective_wait_pct": pct(acc.collective_ms) if self.collectives is not None else None,
            "phase_ms": {k: v / acc.steps for k, v in acc.phase_ms.items()} if acc.steps else {},
            "step_by_shape": shapes,
            "throughput": tput,
            "timing": "cuda-events" if self.on_cuda else "host perf_counter",
        }
