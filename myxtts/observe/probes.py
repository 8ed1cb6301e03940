"""Measurements the commands that judge training share (``profile``, ``doctor``, ``tune``): time
per optimizer step on real batches of a built run, the loader's time per batch, and the
input-bound share a run would see, predicted from the two (docs/design.md, "How we measure").
"""
from __future__ import annotations

import math
import os
import time

import numpy as np
import torch

from myxtts.config import Config
from myxtts.data.loader import make_loader
from myxtts.train.batches import BucketBatches, bucket_plan
from myxtts.train.build import Run
from myxtts.train.precision import sync


def usable_cpus() -> int:
    """CPUs this process may run on (a container's cgroup/affinity, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def time_steps(run: Run, steps: int, seconds: float = 30.0, bb: BucketBatches | None = None) -> dict:
    """Mean time of one optimizer step over the epoch's batch mixture, after ``warm_up``.

    Batches are built in-process before each step and not timed; each step is synchronised
    (CUDA) so its time is the device time. Stops early after ``seconds``."""
    bb = bb or BucketBatches(run.cache, run.cfg, run.device)
    plans = run.sampler.global_plan(0) or [bucket_plan(run.sampler, 0)]
    acc = run.cfg.train.grad_accum
    times, frames = [], 0
    t_end = time.perf_counter() + seconds
    for i in range(steps):
        micro = [bb.device_batch(plans[(i * acc + j) % len(plans)]) for j in range(acc)]
        sync(run.device)
        t0 = time.perf_counter()
        run.step_fn(micro)
        sync(run.device)
        times.append((time.perf_counter() - t0) * 1000.0)
        frames += sum(int(m["mel_lens"].sum()) for m in micro)
        if time.perf_counter() + times[-1] / 1000.0 > t_end:  # the next step would overrun
            break
    ms = float(np.mean(times))
    return {"step_ms": ms, "steps": len(times), "frames_per_s": frames / (sum(times) / 1000.0)}


# ------------------------------------------------------------------------------------ loader
def loader_speed(cache, cfg: Config, workers: int, *, batches: int = 32, seconds: float = 5.0) -> dict:
    """Time per batch of the cached loader with ``workers`` processes, no consumer delay.

    The first batch (worker start-up) and the ``workers - 1`` that were built alongside it are
    not counted; the rest is the loader's steady throughput, measured for ``batches`` batches
    or ``seconds``, whichever ends first."""
    loader = make_loader(cache, cfg, "train", num_workers=workers)  # as the trainer's
    loader.sampler.infinite = True  # an epoch of a small corpus is shorter than the test
    compact = torch.cuda.is_available() and hasattr(loader, "iter_compact")  # as DevicePrefetcher
    it = loader.iter_compact() if compact else iter(loader)
    t0 = time.perf_counter()
    next(it)
    first_s = time.perf_counter() - t0
    for _ in range(max(0, workers - 1)):
        next(it)
    n, frames = 0, 0
    t0 = time.perf_counter()
    while n < batches and time.perf_counter() - t0 < seconds:
        b = next(it)
        frames += int(b["mel_lens"].sum())
        n += 1
    elapsed = time.perf_counter() - t0
    if hasattr(it, "close"):
        it.close()
    del it, loader  # shuts the workers down
    ms = elapsed * 1000.0 / max(n, 1)
    return {"workers": workers, "ms_per_batch": ms, "batches_per_s": 1000.0 / ms if ms else math.inf,
            "frames_per_s": frames / elapsed if elapsed else math.inf, "batches": n,
            "first_batch_s": first_s}


def predicted_input_bound(ms_per_batch: float, step_ms: float, workers: int) -> float:
    """Input-bound % (docs/design.md, "Input-bound") a run would see, from the loader's time per batch with
    ``workers`` workers and the step time. Without workers the training process builds every
    batch itself between steps (counted in full); with workers the loop only waits when the
    workers together are slower than the step."""
    wait = ms_per_batch if workers == 0 else max(0.0, ms_per_batch - step_ms)
    return 100.0 * wait / (wait + step_ms) if wait + step_ms > 0 else 0.0


def workers_estimate(ms_per_batch_0: float, step_ms: float, margin: float) -> int:
    """Workers needed if throughput grows linearly with them, from the in-process time per
    batch; ``margin`` is head-room (>1)."""
    return max(1, math.ceil(ms_per_batch_0 * margin / max(step_ms, 1e-6)))


def batch_bytes(cfg: Config, cache, sampler) -> int:
    """Host bytes of the largest batch (float32 mel + reference, int64 tokens), for
    shared-memory and pinned-memory sizing."""
    from myxtts.data.dataset import ref_frames_for
    from myxtts.data.sampler import round_up

    tr = int(round_up(ref_frames_for(cache.audio_cfg, cfg.data.ref_seconds), cfg.data.pad_multiple))
    m = cache.audio_cfg.n_mels
    return max((bk.batch_size * ((bk.mel_len + tr) * m * 4 + bk.text_len * 8 + 64)
                for bk in sampler.buckets), default=0)
