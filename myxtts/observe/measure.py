"""The one way a training step is measured: the trainer's own loop, after every shape is compiled.

``measure(run, steps)`` is what ``profile``, ``doctor``, ``tune`` and ``bench train`` call, and
what they report:

1. compile: ``train.compile.compile_shapes`` (as a training run does before step 1), one batch
   per bucket shape, timed per shape;
2. warm-up: ``WARM_PASSES`` passes over every shape with ``Loop.step_once``, kept out of the
   statistics by the ``StepTimer`` (eager: one, for the allocator; compiled: a second in case a
   first call's side effects change a guard; CUDA graphs record on the calls after that);
3. timed: ``steps`` more steps (or fewer, when ``seconds`` runs out) under the same timer, with
   the timer hooked into the step for its phases;
4. FLOPs and MFU of the timed steps, when asked for.

The device's memory figures (``train.memory``) count from the start of ``measure``: the
batch-size probes before it are not part of the measured steps.

A timed step, warm-up and time to full speed are defined once, in ``train.timers``. The batches
are the run's own stream (``run.batches``: loader workers, prefetching, real waiting) or a
``FixedBatches``: one real batch per bucket shape, built on the device once, so that modes and
settings compare on identical batches and the loader is not measured.
"""
from __future__ import annotations

import contextlib
import time

from myxtts.data.batch import Batch
from myxtts.data.sampler import make_sampler, shape_plans
from myxtts.observe.flops import count_step_flops, mfu
from myxtts.train import memory
from myxtts.train.batches import BucketBatches
from myxtts.train.compile import compile_shapes, compiled_graphs
from myxtts.train.loop import Loop
from myxtts.train.precision import device_name, sync
from myxtts.train.spec import Run
from myxtts.train.timers import StepTimer, shape_key

WARM_PASSES = {"off": 1, "default": 2, "regional": 2, "cudagraphs": 3}


class FixedBatches:
    """One real batch per batch shape (its first batch of epoch 0), on the device; ``next()``
    cycles through them in the sampler's order of shapes."""

    def __init__(self, cache, cfg, device):
        sampler = make_sampler(cache, cfg, "train")
        bb = BucketBatches(cache, cfg, device)
        self.batches: list[Batch] = []
        for plan in shape_plans(sampler):
            self.batches.append(bb.device_batch(plan))
        sync(device)
        self._i = 0

    def __len__(self) -> int:
        return len(self.batches)

    @property
    def shapes(self) -> list[tuple[int, int, int]]:
        """(B, Tt, Tm) of each batch."""
        return [b.shape for b in self.batches]

    def next(self) -> Batch:
        batch = self.batches[self._i % len(self.batches)]
        self._i += 1
        return batch


def measure(run: Run, steps: int, *, batches=None, seconds: float | None = None,
            beside=contextlib.nullcontext, origin: float | None = None, flops: bool = False) -> dict:
    """Compile, warm up and time ``steps`` optimizer steps of ``run`` (see the module docstring).

    ``batches``: a ``FixedBatches`` (built here when not given) or ``run.batches``.
    ``beside()``: a context manager around the timed steps only (GPU sampling). ``origin``: the
    time time-to-full-speed counts from (default: now, before compiling). ``flops``: also count
    the FLOPs of the timed steps (one eager count per shape, after timing) and the MFU they make
    (``observe.flops``).

    Returns ``StepTimer.summary()`` with the compile, warm-up, host-launch, memory and loss
    figures added; the losses of the warm-up steps are dropped."""
    origin = time.perf_counter() if origin is None else origin
    memory.reset(run.device)
    batches = batches if batches is not None else FixedBatches(run.cache, run.cfg, run.device)
    step, n = run.step_fn, len(run.shapes)
    g0 = compiled_graphs()
    fixed = batches.batches if isinstance(batches, FixedBatches) else None
    by_shape = compile_shapes(run, batches=[b.tensors for b in fixed] if fixed else None)
    passes = WARM_PASSES[step.compile_mode]
    fps = run.cfg.audio.sample_rate / run.cfg.audio.hop_length
    timer = StepTimer(run.device, warmup_steps=passes * n, frames_per_second=fps, origin=origin)
    loop = Loop(run, timer, batches)
    t0 = time.perf_counter()
    for _ in range(passes * n):
        loop.step_once()
    sync(run.device)
    warm_s, warm_graphs, warm_recompiles = time.perf_counter() - t0, compiled_graphs() - g0, loop.recompiles
    step.read_window()  # the warm-up losses

    with beside():
        host_ms, timed = _timed_steps(run, loop, timer, steps, seconds)
    window = step.read_window()
    summary = timer.summary()
    out = {**summary, "compile_s": sum(by_shape) if by_shape else None,
           "compile_s_by_shape": dict(zip(map(shape_key, batches.shapes if fixed else run.shapes), by_shape))
           if by_shape else None,
           "warmup_s": warm_s, "warmup_passes": passes, "graphs_compiled_in_warmup": warm_graphs,
           "recompiles_after_warmup": loop.recompiles - warm_recompiles,
           "host_ms_per_step": host_ms / summary["steps"] if summary["steps"] else None,
           "loss": window.get("loss"), "skipped_steps": window.get("skipped_steps")}
    mem = memory.read_memory(run.device)
    out["memory"] = mem.as_dict() if mem else None
    if flops:
        per_shape = {shape_key(k): count_step_flops(run.model, b, run.precision) for k, (_, b) in timed.items()}
        total = sum(per_shape[shape_key(k)] * c for k, (c, _) in timed.items())
        out.update(flops_by_shape=per_shape, flops=total,
                   **mfu(total, summary["wall_s"], device_name(run.device)))
    return out


def _timed_steps(run: Run, loop: Loop, timer: StepTimer, steps: int, seconds: float | None) -> tuple[float, dict]:
    """``steps`` steps of ``loop`` (fewer when ``seconds`` would run out), timed by ``timer``
    hooked into the step → (host ms of them all, {shape: [steps, one of its micro-batches]})."""
    host_ms, timed = 0.0, {}
    run.step_fn.hooks.append(timer)
    try:
        t_end = None if seconds is None else time.perf_counter() + seconds
        for _ in range(steps):
            s0 = time.perf_counter()
            got = loop.step_once()
            host_ms += loop.last_host_ms
            for b in got:
                timed.setdefault(b.shape, [0, b.tensors])[0] += 1
            if t_end is not None and time.perf_counter() + (time.perf_counter() - s0) > t_end:
                break  # the next step would overrun
        sync(run.device)
    finally:
        run.step_fn.hooks.remove(timer)
    return host_ms, timed
