"""The input pipeline measured: how fast a loader delivers batches, against the step it feeds.

``throughput`` is the one definition of a loader's speed: the batches a loader had built or
queued while starting are skipped, and only its steady rate is timed. On it rest

* ``loader_speed``: the cached loader the trainer uses, with a number of workers (``doctor``,
  ``tune``);
* ``naive_loader``: what many TTS trainers do every epoch, a torch Dataset that decodes,
  resamples, trims and computes the mel per item, random batches padded by ``collate_fn``: the
  "before" ``bench loader`` compares ours with;
* ``simulate``: the cached loader feeding a consumer that holds each batch for a given step
  time, so a GPU's step is stood in for by sleeping (``bench loader``).

The input-bound share a run would see is predicted from a loader's time per batch and the step
time (``predicted_input_bound``) or measured against the simulated step (``simulate``); both
are defined in docs/design.md, "Input-bound".
"""
from __future__ import annotations

import math
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from myxtts import audio
from myxtts.config import Config
from myxtts.data.dataset import ref_len_for
from myxtts.data.features import MEL_PAD
from myxtts.data.loader import make_loader
from myxtts.data.sampler import make_sampler


def throughput(it, batches: int, *, warm_up: int, seconds: float = math.inf) -> dict:
    """Time ``batches`` batches of the iterator ``it`` (or fewer, when ``seconds`` runs out) after
    ``warm_up`` batches (at least one: worker start-up) that are not counted."""
    for _ in range(max(1, warm_up)):
        next(it)
    n, frames, t0 = 0, 0, time.perf_counter()
    while n < batches and time.perf_counter() - t0 < seconds:
        frames += int(next(it)["mel_lens"].sum())
        n += 1
    wall = time.perf_counter() - t0
    ms = wall * 1000.0 / max(n, 1)
    return {"ms_per_batch": ms, "batches_per_s": 1000.0 / ms if ms else math.inf,
            "frames_per_s": frames / wall if wall else math.inf, "batches": n, "seconds": wall,
            "frames": frames}


def tensors(batches):
    """The tensors of each Batch of ``batches``."""
    for b in batches:
        yield b.tensors


def cached_loader(cache, cfg: Config, workers: int):
    """The trainer's loader with ``workers`` processes, endless (an epoch of a small corpus is
    shorter than a measurement)."""
    loader = make_loader(cache, cfg, "train", num_workers=workers)
    loader.sampler.infinite = True
    return loader


def loader_speed(cache, cfg: Config, workers: int, *, batches: int = 32, seconds: float = 5.0) -> dict:
    """``throughput`` of the cached loader with ``workers`` processes, no consumer delay, as the
    device prefetcher takes it on a GPU (worker form) or the step on a CPU (finished)."""
    loader = cached_loader(cache, cfg, workers)
    it = loader.iterate(None if torch.cuda.is_available() else loader.features.finish)
    try:
        return {"workers": workers, **throughput(tensors(it), batches, warm_up=workers, seconds=seconds)}
    finally:
        it.close()
        del it, loader  # shuts the workers down


def predicted_input_bound(ms_per_batch: float, step_ms: float, workers: int) -> float:
    """Input-bound % a run would see, from the loader's time per batch with ``workers`` workers
    and the step time. Without workers the training process builds every batch itself between
    steps (counted in full); with workers the loop only waits when the workers together are
    slower than the step."""
    wait = ms_per_batch if workers == 0 else max(0.0, ms_per_batch - step_ms)
    return 100.0 * wait / (wait + step_ms) if wait + step_ms > 0 else 0.0


def batch_bytes(cfg: Config, cache, sampler) -> int:
    """Host bytes of the largest batch (float32 mel + reference, int64 tokens), for
    shared-memory and pinned-memory sizing."""
    tr = ref_len_for(cache.audio_cfg, cfg.data.ref_seconds, cfg.data.pad_multiple)
    m = cache.audio_cfg.n_mels
    return max((bk.batch_size * ((bk.mel_len + tr) * m * 4 + bk.text_len * 8 + 64)
                for bk in sampler.buckets), default=0)


def padding_by_multiple(cache, cfg: Config) -> dict:
    """Mel padding and filler of the sampler's plan at each ``data.pad_multiple`` worth trying."""
    out = {}
    for pm in sorted({1, 16, 32, 64, cfg.data.pad_multiple}):
        if pm % cfg.model.reduction == 0:
            rep = make_sampler(cache, cfg, "train", pad_multiple=pm).padding_report()
            out[pm] = {"mel_padding_pct": round(rep["mel_padding_pct"], 2), "filler_pct": round(rep["filler_pct"], 2)}
    return out


# ------------------------------------------------------------------------------------ naive
class NaiveDataset(Dataset):
    """Per utterance, every epoch: decode → resample → trim → mel on the CPU."""

    def __init__(self, cache, indices):
        self.cache, self.indices = cache, np.asarray(indices)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, k: int):
        c, i = self.cache, int(self.indices[k])
        wav = audio.preprocess(audio.load_audio(c.source_root / c.index.audio[i], c.audio_cfg.sample_rate),
                               c.audio_cfg)
        mel = audio.mel_spectrogram(wav, c.audio_cfg)  # (T, n_mels)
        return torch.from_numpy(c.tokens(i).astype(np.int64)), torch.from_numpy(mel)


def naive_collate(items) -> dict:
    B = len(items)
    Tt, Tm = max(t.shape[0] for t, _ in items), max(m.shape[0] for _, m in items)
    tokens = torch.zeros(B, Tt, dtype=torch.long)
    mel = torch.full((B, Tm, items[0][1].shape[1]), MEL_PAD)  # (B, Tm, n_mels)
    for b, (t, m) in enumerate(items):
        tokens[b, :t.shape[0]], mel[b, :m.shape[0]] = t, m
    return {"tokens": tokens, "mel": mel, "mel_lens": torch.tensor([m.shape[0] for _, m in items])}


def naive_loader(cache, cfg: Config, workers: int, batch_size: int):
    """The naive loader's batches, endless, with the same workers as ours."""
    dl = DataLoader(NaiveDataset(cache, cache.indices("train")), batch_size=batch_size, shuffle=True,
                    num_workers=workers, collate_fn=naive_collate, persistent_workers=workers > 0,
                    prefetch_factor=cfg.data.prefetch_factor if workers else None)
    while True:
        yield from dl


# -------------------------------------------------------------------------------- simulated
def simulate(loader, step_ms: dict, n: int) -> dict:
    """A consumer that holds each batch for its step time (``step_ms``: {(B, Tt, Tm): ms});
    returns the input-bound % it saw.

    The first batches run the same way but are not counted: worker start-up, and the loader
    filling its queues to the steady state a training run lives in. ``loader`` must be endless."""
    it = loader.iterate(None)  # the worker form: what the DevicePrefetcher takes on a GPU
    warm = max(20, n // 10)
    waits, t0, b = [], 0.0, None
    for k in range(warm + n):
        if k == warm:
            t0 = time.perf_counter()
        b = None  # the previous batch is freed by the "step", not counted as waiting
        w0 = time.perf_counter()
        b = next(it)
        waits.append(time.perf_counter() - w0)
        time.sleep(step_ms[b.shape] / 1e3)  # the "GPU" is busy
    wall = time.perf_counter() - t0
    it.close()
    w = np.array(waits[warm:]) * 1e3
    return {"input_bound_pct": float(100.0 * w.sum() / 1e3 / wall), "wait_s": float(w.sum() / 1e3),
            "wall_s": wall, "batches": n, "warm_up_batches": warm,
            "wait_ms": {"p50": float(np.percentile(w, 50)), "p99": float(np.percentile(w, 99)),
                        "max": float(w.max()), "batches_waiting_over_1ms": int((w > 1).sum())}}
