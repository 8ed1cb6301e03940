"""Loader measurements the commands that judge training share (``doctor``, ``tune``): the
loader's time per batch, and the input-bound share a run would see, predicted from it and the
step time ``observe.measure`` gives (docs/design.md, "How we measure").
"""
from __future__ import annotations

import math
import time

import torch

from myxtts.config import Config
from myxtts.data.loader import make_loader


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
