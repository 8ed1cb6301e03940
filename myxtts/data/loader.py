"""Loader assembly: the sampler's plans to loader workers and back, as finished Batches.

Data path, one module per job::

    BucketSampler (sampler.py) ──BatchPlan + ring slot──▶ DataLoader workers (BatchBuilder,
        dataset.py: slice + pad into a reused shared-memory slot, features.py's worker form)
        ──▶ host thread (transport.py: copy out of the slot, pinned on CUDA; finished here for
        a CPU consumer) ──▶ DevicePrefetcher (device.py: H2D copy of batch N+1 on a side
        stream while step N runs, finished on the GPU) ──▶ training step

The sampler runs in the main process and yields whole-batch plans; ``batch_size=None`` makes
each plan one DataLoader item, so workers build whole batches and the DataLoader keeps them in
sampler order no matter which worker finishes first. Every batch carries its plan. Nothing
random happens in workers, so order and content depend only on (seed, epoch, position): resume
is exact.

Trainer usage::

    cache = Cache(cfg_path_or_dir)
    train = make_loader(cache, cfg, "train", rank=rank, world_size=world)
    stream = BatchStream(train, device)
    stream.load_state_dict(ckpt["data"])                  # optional: exact mid-epoch resume
    batch = next(stream); stream.last_wait_s              # Batch on the device; wait seconds
    ckpt["data"] = stream.state_dict()
    for batch in DevicePrefetcher(make_loader(cache, cfg, "val"), device): ...
"""
from __future__ import annotations

import atexit
import sys
import weakref

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

from myxtts.config import Config
from myxtts.data import embeddings
from myxtts.data.batch import BatchPlan
from myxtts.data.dataset import BatchBuilder
from myxtts.data.features import features_for
from myxtts.data.sampler import BucketSampler, make_sampler
from myxtts.data.transport import Finish, HostIter, SlotRing
from myxtts.data.workers import hold_stop_signals, ignore_stop_signals


class _SlotSampler(Sampler):
    """The DataLoader's sampler: the BucketSampler's plans, each with a free ring slot."""

    def __init__(self, sampler: BucketSampler, ring: SlotRing | None):
        self.sampler, self.ring = sampler, ring

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self):
        for plan in self.sampler:
            yield plan._replace(slot=self.ring.acquire()) if self.ring is not None else plan


class BatchLoader:
    """What make_loader returns. ``iter(loader)`` is one pass (endless with an infinite sampler)
    of :class:`~myxtts.data.batch.Batch` items holding the batch contract on the CPU;
    :meth:`iterate` leaves the finishing to the caller (a GPU consumer finishes on the GPU).
    ``.sampler`` is the BucketSampler, ``.dataset`` the BatchBuilder, ``.features`` the run's
    feature strategy, ``.dataloader`` the torch DataLoader."""

    def __init__(self, dataloader: DataLoader, sampler: BucketSampler, ring: SlotRing | None,
                 pin: bool):
        self.dataloader, self.sampler, self.ring, self.pin = dataloader, sampler, ring, pin
        self.dataset: BatchBuilder = dataloader.dataset
        self.features = self.dataset.features
        self._thread = None  # (thread, stop event) of the latest pass
        _LOADERS.add(self)

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> HostIter:
        return self.iterate(self.features.finish)

    def iterate(self, finish: Finish | None) -> HostIter:
        """One pass; the host thread applies ``finish`` to each batch (None: the worker form)."""
        self.stop()
        if self.ring is not None:
            self.ring.reset()  # the old pass's in-flight slots: its tasks are drained by iter()
        # Workers it starts ignore SIGINT/SIGTERM from the outset (spawned off Linux).
        with hold_stop_signals(spawn=not sys.platform.startswith("linux")):
            it = iter(self.dataloader)  # in the calling thread: sets up worker signal handling
        host = HostIter(self, it, finish)
        self._thread = host.handle
        return host

    def stop(self, timeout: float | None = None) -> None:
        """Stop the running pass: its thread no longer touches the DataLoader's iterator (one
        per persistent DataLoader, reset by the next pass), the ring or the sampler."""
        if self._thread is not None:
            thread, stop = self._thread
            stop.set()
            thread.join(timeout)
            self._thread = None


_LOADERS: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:  # a thread still inside torch at interpreter exit aborts the process
    for loader in list(_LOADERS):
        loader.stop(timeout=2.0)


def make_loader(cache, cfg: Config, split: str = "train", *, rank: int = 0, world_size: int = 1,
                epoch: int = 0, seed: int | None = None, with_wav: bool = False,
                with_voice: bool | None = None, num_workers: int | None = None,
                shuffle: bool | None = None, persistent_workers: bool | None = None) -> BatchLoader:
    """One split's loader. Training references come from training utterances only; validation
    ones from any. ``with_voice``: whether the batches carry the references' speaker embeddings
    (default: for a ``model.speaker_embedding=ge2e`` model's batches; not for the vocoder's,
    which carry waveforms, unless it reads the mels of such a model and says so)."""
    d = cfg.data
    sampler = make_sampler(cache, cfg, split, rank=rank, world_size=world_size, seed=seed,
                           shuffle=shuffle)
    sampler.set_epoch(epoch)
    pool = cache.indices("train") if split == "train" else np.arange(len(cache))
    if split == "train" and pool.size == 0:
        pool = np.arange(len(cache))
    if with_voice is None:  # the acoustic model's batches: as its setting says
        with_voice = cfg.model.speaker_embedding == "ge2e" and not with_wav
    ref_embeddings = embeddings.ensure(cache) if with_voice else None
    dataset = BatchBuilder(cache, features_for(cache, cfg, with_wav), ref_seconds=d.ref_seconds,
                           pad_multiple=d.pad_multiple, seed=sampler.seed, ref_pool=pool,
                           speaker_embeddings=ref_embeddings)
    workers = d.num_workers if num_workers is None else num_workers
    persistent = (split == "train") if persistent_workers is None else persistent_workers
    persistent = persistent and workers > 0
    fork = sys.platform.startswith("linux")  # fork is the safe default there, not on macOS
    ring = None
    if persistent and fork and len(sampler.buckets):
        # Slots for every batch the DataLoader keeps in flight, plus the one being copied out.
        # Only with persistent workers: a new iterator then drains the old one's tasks first.
        biggest = max(SlotRing.nbytes(dataset.layout(_plan_of(b))) for b in sampler.buckets)
        ring = SlotRing(d.prefetch_factor * workers + 2, biggest)
        dataset.ring = ring
    loader = DataLoader(
        dataset, batch_size=None, sampler=_SlotSampler(sampler, ring), num_workers=workers,
        pin_memory=False,  # the host thread pins (out of the ring) itself
        persistent_workers=persistent,
        prefetch_factor=d.prefetch_factor if workers > 0 else None,
        worker_init_fn=_worker_init if workers > 0 else None,
        multiprocessing_context="fork" if workers > 0 and fork else None)
    return BatchLoader(loader, sampler, ring, pin=d.pin_memory and torch.cuda.is_available())


def _plan_of(bucket) -> BatchPlan:
    return BatchPlan(np.zeros(bucket.batch_size, np.int64), 0, bucket.mel_len, bucket.text_len, 0, 0, 0)


def _worker_init(_: int) -> None:
    torch.set_num_threads(1)  # workers copy arrays; threads would only fight the trainer
    ignore_stop_signals()  # SIGINT/SIGTERM to the process group: the trainer decides
