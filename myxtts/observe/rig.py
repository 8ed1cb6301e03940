"""The trainer's pieces, assembled as ``train.trainer.train`` assembles them, for the commands
that measure training without running a training run (``profile``, ``doctor``, ``tune``).

Same constructors, same order (device and precision → model → compiled step → optimizer →
batches), single process: what is measured here is the step the trainer would run. Also the
two measurements the commands share: time per step on real batches, and the loader's time per
batch, from which the input-bound share a run would see is predicted (design.md §5).
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
from dataclasses import dataclass

import numpy as np
import torch

from myxtts.config import Config
from myxtts.data.cache import Cache
from myxtts.data.dataset import widen
from myxtts.data.loader import DevicePrefetcher, make_loader, make_sampler, otf_mel
from myxtts.data.sampler import BatchPlan
from myxtts.models.xtts import XTTS
from myxtts.train.batches import Batches
from myxtts.train.distributed import DistInfo
from myxtts.train.optim import build_optimizer, build_scheduler
from myxtts.train.precision import Precision, pick_device, resolve
from myxtts.train.step import TrainStep


@dataclass
class Rig:
    cfg: Config
    cache: Cache
    device: torch.device
    precision: Precision
    core: XTTS
    opt: torch.optim.Optimizer
    sched: object
    step_fn: TrainStep
    sampler: object            # BucketSampler of the training split (the run's shapes)
    batches: Batches | None    # the trainer's endless device batch stream (None if not asked)

    @property
    def shapes(self) -> list[tuple[int, int, int]]:
        return self.sampler.shapes()


def usable_cpus() -> int:
    """CPUs this process may run on (a container's cgroup/affinity, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"


def build(cfg: Config, data, *, compile: str | None = None, with_batches: bool = True) -> Rig:
    """Model, optimizer, step and batches on this machine's device. ``compile`` overrides
    ``train.compile`` (``"off"`` for eager measurements that must not wait for compilation)."""
    device = pick_device(0)
    precision = resolve(cfg.train.precision, device)
    torch.manual_seed(cfg.train.seed)
    cache = Cache(data, expect=cfg)
    core = XTTS(cfg.model, len(cache.vocab.symbols), cfg.audio.n_mels).to(device)
    opt = build_optimizer(core, cfg.train)
    sched = build_scheduler(opt, cfg.train)
    tcfg = cfg.train if compile is None else dataclasses.replace(cfg.train, compile=compile)
    step_fn = TrainStep(core, core, opt, sched, precision, tcfg)
    batches = Batches(cache, cfg, device, DistInfo()) if with_batches else None
    sampler = batches.sampler if batches else make_sampler(cache, cfg, "train")
    return Rig(cfg, cache, device, precision, core, opt, sched, step_fn, sampler, batches)


# ------------------------------------------------------------------------------ bucket batches
def bucket_plan(sampler, b: int, epoch: int = 0) -> BatchPlan:
    """A full batch of bucket ``b``'s shape from its own members (repeated if it has fewer)."""
    bk = sampler.buckets[b]
    members = np.flatnonzero(sampler.bucket_of == b)
    if members.size == 0:
        members = np.flatnonzero(sampler.bucket_of >= 0)[:1]
    rows = np.resize(members, bk.batch_size)
    return BatchPlan(rows, min(members.size, bk.batch_size), bk.mel_len, bk.text_len, epoch, b)


class BucketBatches:
    """Device batches of any bucket shape, built in this process (no loader workers)."""

    def __init__(self, cache, cfg: Config, device: torch.device):
        self.cfg, self.device = cfg, device
        self.dataset = make_loader(cache, cfg, "train", num_workers=0).dataset
        self.transform = otf_mel(cache, cfg)

    def host(self, plan: BatchPlan) -> dict:
        return widen(self.dataset[plan])  # the batch contract (workers write a compact form)

    def device_batch(self, plan: BatchPlan) -> dict:
        pf = DevicePrefetcher([self.host(plan)], self.device, self.transform)
        return next(iter(pf))

    def of_bucket(self, sampler, b: int) -> dict:
        return self.device_batch(bucket_plan(sampler, b))


def largest_bucket(sampler) -> int:
    """The bucket whose batch needs the most memory: most padded frames, then longest rows
    (attention grows with length)."""
    return max(range(len(sampler.buckets)),
               key=lambda b: (sampler.buckets[b].batch_size * sampler.buckets[b].mel_len,
                              sampler.buckets[b].mel_len, sampler.buckets[b].text_len))


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def warm_up(rig: Rig, bb: BucketBatches | None = None) -> float:
    """One step per bucket shape (each compiles once when train.compile is on). Seconds taken."""
    bb = bb or BucketBatches(rig.cache, rig.cfg, rig.device)
    t0 = time.perf_counter()
    for b in range(len(rig.sampler.buckets)):
        rig.step_fn([bb.of_bucket(rig.sampler, b)])
    sync(rig.device)
    return time.perf_counter() - t0


def time_steps(rig: Rig, steps: int, seconds: float = 30.0, bb: BucketBatches | None = None) -> dict:
    """Mean time of one optimizer step over the epoch's batch mixture, after ``warm_up``.

    Batches are built in-process before each step and not timed; each step is synchronised
    (CUDA) so its time is the device time. Stops early after ``seconds``."""
    bb = bb or BucketBatches(rig.cache, rig.cfg, rig.device)
    plans = rig.sampler.global_plan(0) or [bucket_plan(rig.sampler, 0)]
    acc = rig.cfg.train.grad_accum
    times, frames = [], 0
    t_end = time.perf_counter() + seconds
    for i in range(steps):
        micro = [bb.device_batch(plans[(i * acc + j) % len(plans)]) for j in range(acc)]
        sync(rig.device)
        t0 = time.perf_counter()
        rig.step_fn(micro)
        sync(rig.device)
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
    """Input-bound % (design.md §5) a run would see, from the loader's time per batch with
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
