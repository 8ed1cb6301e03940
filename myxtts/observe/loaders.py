"""The input pipeline measured: how fast a loader delivers batches, against the step it feeds.

``throughput`` is the one definition of a loader's speed: the batches a loader had built or
queued while starting are skipped, and only its steady rate is timed. On it rest

* ``loader_speed``: the cached loader the trainer uses, with a number of workers (``doctor``,
  ``tune``);
* ``naive_loader``: what many TTS trainers do every epoch, a torch Dataset that decodes,
  resamples, trims and computes the mel per item, random batches padded by ``collate_fn``: the
  "before" ``bench loader`` compares ours with;
* ``simulate``: the cached loader feeding a consumer that holds each batch for a given step
  time, so a GPU's step is stood in for by sleeping;
* ``compare``: all three side by side on one cache, the record ``bench loader`` prints.

The input-bound share a run would see is predicted from a loader's time per batch and the step
time (``predicted_input_bound``) or measured against the simulated step (``simulate``); both
are defined in docs/design.md, "Input-bound".
"""
from __future__ import annotations

import math
import os
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
from myxtts.observe.flops import simulated_step_ms
from myxtts.observe.input_rules import INPUT_BOUND_TARGET_PCT, PADDING_LOW_PCT
from myxtts.train.precision import device_name


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


# -------------------------------------------------------------------------------- side by side
def compare(cache, cfg: Config, workers: int, quick: bool = False, step_ms: float | None = None) -> dict:
    """The naive loader against the cached one on ``cache``, both with ``workers`` workers, and
    the cached one feeding a simulated step: ``step_ms`` per batch, else the model's FLOPs at an
    assumed MFU of an H100 (``observe.flops.simulated_step_ms``). ``quick``: fewer batches."""
    load_before = os.getloadavg()[0]  # other processes' CPU use skews every number below
    n_naive, n_cached, n_sim = (4, 200, 300) if quick else (20, 1000, 1500)
    sampler = make_sampler(cache, cfg, "train")
    rep, shapes = sampler.padding_report(), sampler.shapes()
    step, step_info = _step_times(cache, cfg, sampler, quick, step_ms)

    # (a) naive: same workers, random batches of the cached plan's mean size
    batch_size = max(1, round(float(np.mean([len(p.indices) for p in sampler.plan()]))))
    naive = throughput(naive_loader(cache, cfg, workers, batch_size), n_naive, warm_up=workers)
    naive["batch_size"] = batch_size
    # (b) cached, as the GPU path consumes it (worker form) and as the float32 contract
    loader = cached_loader(cache, cfg, workers)
    ahead = cfg.data.prefetch_factor * max(1, workers) + 2  # DataLoader queue + host thread
    cached = throughput(tensors(loader.iterate(None)), n_cached, warm_up=ahead)
    cached["frames_per_s_float32"] = throughput(tensors(iter(loader)), n_cached // 2, warm_up=ahead)["frames_per_s"]
    # (c) the same loader feeding the simulated H100
    sim = simulate(loader, step, n_sim)

    train = cache.indices("train")
    minutes = float(cache.index.n_frames[train].sum()) * cache.audio_cfg.hop_length / cache.audio_cfg.sample_rate / 60
    speedup = cached["frames_per_s"] / naive["frames_per_s"]
    return {
        "device": device_name(), "workers": workers, "cache": str(cache.path),
        "corpus": {"train_utterances": int(train.size), "speakers": len(cache.speakers),
                   "train_minutes": round(minutes, 2)},
        "loader": {
            "naive": naive,
            "cached": dict(cached, speedup=speedup,
                           speedup_float32=cached["frames_per_s_float32"] / naive["frames_per_s"],
                           input_bound_pct=sim["input_bound_pct"], simulated=sim),
            "padding_pct": rep["mel_padding_pct"], "text_padding_pct": rep["text_padding_pct"],
            "filler_pct": rep["filler_pct"], "shapes": [list(s) for s in shapes],
            "batches_per_epoch": len(sampler), "frame_budget": cfg.data.frame_budget,
            "pad_multiple": cfg.data.pad_multiple, "max_buckets": cfg.data.max_buckets,
            "padding_by_pad_multiple": padding_by_multiple(cache, cfg)},
        "simulated_step": step_info,
        "quick": bool(quick),
        "load_avg_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2),
                          "cores": os.cpu_count()},
        "targets": {"cached_vs_naive_ge_20x": speedup >= 20,
                    "input_bound_lt_1pct": sim["input_bound_pct"] < INPUT_BOUND_TARGET_PCT,
                    "padding_le_10pct": rep["mel_padding_pct"] <= PADDING_LOW_PCT}}


def _step_times(cache, cfg: Config, sampler, quick: bool, step_ms: float | None) -> tuple[dict, dict]:
    """({(B, Tt, Tm): simulated step ms}, how they were found, with their mean over the plan's
    batches)."""
    shapes = sampler.shapes()
    if step_ms:
        step = {s: step_ms for s in shapes}
        info = {"source": "--step-ms", "formula": f"fixed {step_ms} ms per batch"}
    else:
        step, info = simulated_step_ms(cfg, cache, shapes, quick)
    weights = {s: sum(p.mel_len == s[2] and len(p.indices) == s[0] for p in sampler.plan()) for s in shapes}
    mean_ms = sum(step[s] * w for s, w in weights.items()) / max(1, sum(weights.values()))
    return step, dict(info, mean_ms=mean_ms)
