"""Loader assembly, the device prefetcher, and the trainer's endless, resumable batch stream.

Data path::

    BucketSampler ──BatchPlan + ring slot──▶ DataLoader workers (CachedBatches: slice + pad
        into a reused shared-memory slot) ──▶ host thread (copy out of the slot, pinned on
        CUDA) ──▶ DevicePrefetcher (H2D copy of batch N+1 on a side stream while step N runs;
        float16 → float32 and OnTheFlyMel on the device) ──▶ training step

The sampler runs in the main process and yields whole-batch plans; ``batch_size=None`` makes
each plan one DataLoader item, so workers collate whole batches and the DataLoader keeps them
in sampler order no matter which worker finishes first. Nothing random happens in workers, so
order and content depend only on (seed, epoch, position): resume is exact.

Trainer usage::

    cache = Cache(cfg_path_or_dir)
    train = make_loader(cache, cfg, "train", rank=rank, world_size=world)
    stream = BatchStream(train, device, transform=otf_mel(cache, cfg))  # transform None if cached
    stream.load_state_dict(ckpt["data"])                  # optional: exact mid-epoch resume
    batch, plan = next(stream); stream.last_wait_s        # device tensors, BatchPlan; wait seconds
    ckpt["data"] = stream.state_dict()
    for batch in DevicePrefetcher(make_loader(cache, cfg, "val"), device, otf_mel(...)): ...
"""
from __future__ import annotations

import atexit
import collections
import sys
import threading
import time
import weakref

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

from myxtts.config import Config
from myxtts.data.dataset import BatchError, CachedBatches, SlotRef, SlotRing, single_threaded_copy, widen
from myxtts.data.onthefly import OnTheFlyBatches, OnTheFlyMel
from myxtts.data.sampler import BatchPlan, BucketSampler
from myxtts.data.workers import hold_stop_signals, ignore_stop_signals
from myxtts.errors import UserError


class _SlotSampler(Sampler):
    """The DataLoader's sampler: the BucketSampler's plans, each with a free ring slot.

    Each plan handed to the DataLoader waits in ``issued`` until its batch comes back. The
    DataLoader returns batches in sampler order, so the oldest waiting plan is always the plan
    of the batch that arrives next: the host thread pairs them without a worker sending the
    plan back."""

    def __init__(self, sampler: BucketSampler, ring: SlotRing | None):
        self.sampler, self.ring = sampler, ring
        self.wide = True  # set per pass: workers build float32 (contract) or compact batches
        self.issued: collections.deque = collections.deque()

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self):
        self.issued.clear()  # a stopped pass's plans: the DataLoader drops their batches
        for plan in self.sampler:
            plan = plan._replace(slot=self.ring.acquire() if self.ring is not None else None,
                                 wide=self.wide)
            self.issued.append(plan)
            yield plan


class BatchLoader:
    """What make_loader returns: iterate it like a DataLoader (``.sampler`` is the
    BucketSampler, ``.dataset`` the batch builder, ``.dataloader`` the torch DataLoader).

    A background thread (like the DataLoader's pin-memory thread, on CPU too) takes finished
    batches, copies them out of their ring slot (into pinned memory when pinning is on) and
    frees the slot, so the training thread only ever pops a ready batch from a queue.
    ``iter(loader)`` yields the batch contract; :meth:`iter_compact` the compact form (float16
    mels) that the DevicePrefetcher widens on the GPU after a copy of half the bytes;
    :meth:`iter_planned` either form, each batch paired with the BatchPlan it was built from.
    """

    def __init__(self, dataloader: DataLoader, sampler: BucketSampler, ring: SlotRing | None,
                 pin: bool):
        self.dataloader, self.sampler, self.ring, self.pin = dataloader, sampler, ring, pin
        self.dataset = dataloader.dataset
        self._thread = None  # (thread, stop event) of the latest pass
        _LOADERS.add(self)

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self):
        return _HostIter(self, compact=False)

    def iter_compact(self):
        return _HostIter(self, compact=True)

    def iter_planned(self, compact: bool = False):
        """``(batch, plan)`` pairs: the plan says which rows the batch holds without reading
        its tensors (on the host, so no device sync)."""
        return _HostIter(self, compact=compact, planned=True)

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


class _HostIter:
    """One pass (or, with an infinite sampler, an endless run) over a BatchLoader.

    The hand-over is a deque, not a queue.Queue: when a batch is ready the consumer pops it
    without touching a lock (a lock or condition operation right after the training thread
    wakes costs 20-45 us on a VM, a measurable share of a few-ms step). The host thread keeps
    up to DEPTH batches ready and polls for room; it signals an Event only for a consumer that
    found the deque empty."""

    DEPTH = 3  # ready batches; polled every ms, so enough for steps down to ~0.5 ms

    def __init__(self, loader: BatchLoader, compact: bool, planned: bool = False):
        loader.stop()
        if loader.ring is not None:
            loader.ring.reset()  # the old pass's in-flight slots: its tasks are drained by iter()
        loader.dataloader.sampler.wide = not compact  # the workers widen, in parallel
        # Workers it starts ignore SIGINT/SIGTERM from the outset (spawned off Linux).
        with hold_stop_signals(spawn=not sys.platform.startswith("linux")):
            it = iter(loader.dataloader)  # in the calling thread: sets up worker signal handling
        self.planned = planned
        self._ready: collections.deque = collections.deque()
        self._filled, self._stop = threading.Event(), threading.Event()
        # The thread holds no reference to self, so an abandoned iterator is collected, which
        # stops its thread.
        self._thread: threading.Thread | None = threading.Thread(
            target=_host_loop, args=(it, loader, compact, self._ready, self._filled, self._stop),
            name="myxtts-batches", daemon=True)
        self._thread.start()
        loader._thread = (self._thread, self._stop)

    def __iter__(self):
        return self

    def __next__(self) -> dict:
        if self._thread is None:
            raise StopIteration
        while True:
            try:
                kind, value = self._ready.popleft()  # atomic; the fast path takes no lock
                break
            except IndexError:
                self._filled.clear()
                if not self._ready:
                    self._filled.wait(0.1)
        if kind == "batch":
            return value if self.planned else value[0]
        self.close()
        if kind == "error":
            raise value
        raise StopIteration

    def close(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread = None

    def __del__(self):
        self.close()


def _to_host(loader: BatchLoader, item, compact: bool) -> dict:
    """A worker's result → tensors that own their memory (pinned if asked); frees its slot."""
    if isinstance(item, BatchError):  # the worker's one-line message, without its traceback
        if item.plan.slot is not None and loader.ring is not None:
            loader.ring.release(item.plan.slot)
        raise UserError(item.message)
    in_ring = isinstance(item, SlotRef)
    src = loader.ring.views(item.plan.slot, loader.dataset.layout(item.plan)) if in_ring else item
    out = src if compact else widen(src)  # widen makes new mel tensors, keeps the others
    # Copy what still lives in the ring (or everything, into pinned memory when pinning).
    out = {k: single_threaded_copy(v, loader.pin) if loader.pin or (in_ring and v is src[k]) else v
           for k, v in out.items()}
    if in_ring:
        loader.ring.release(item.plan.slot)
    return out


def _host_loop(it, loader: BatchLoader, compact: bool, ready: collections.deque,
               filled: threading.Event, stop: threading.Event) -> None:
    def hand_over(entry) -> bool:
        while len(ready) >= _HostIter.DEPTH:  # full: poll; the consumer takes no lock to signal
            if stop.wait(0.001):
                return False
        ready.append(entry)
        filled.set()
        return not stop.is_set()

    issued = loader.dataloader.sampler.issued
    try:
        for item in it:
            plan = issued.popleft()  # this batch's: the DataLoader keeps sampler order
            if not hand_over(("batch", (_to_host(loader, item, compact), plan))):
                return
        hand_over(("end", None))
    except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
        hand_over(("error", e))


def make_sampler(cache, cfg: Config, split: str = "train", *, rank: int = 0, world_size: int = 1,
                 seed: int | None = None, shuffle: bool | None = None) -> BucketSampler:
    """Shapes are planned over ALL utterances (train + val), so both splits share them."""
    return BucketSampler.from_config(
        cache.n_frames, cache.n_tokens, cfg.data, cache.indices(split),
        plan_indices=np.arange(len(cache)), shuffle=(split == "train") if shuffle is None else shuffle,
        seed=cfg.train.seed if seed is None else seed, rank=rank, world_size=world_size)


def make_loader(cache, cfg: Config, split: str = "train", *, rank: int = 0, world_size: int = 1,
                epoch: int = 0, seed: int | None = None, with_wav: bool = False,
                num_workers: int | None = None, shuffle: bool | None = None,
                persistent_workers: bool | None = None) -> BatchLoader:
    """One split's loader. ``loader.sampler`` is the BucketSampler (set_epoch, state_dict,
    shapes, padding_report); ``loader.dataset`` builds batches (CachedBatches or on-the-fly).

    Training references come from training utterances only; validation ones from any."""
    d = cfg.data
    sampler = make_sampler(cache, cfg, split, rank=rank, world_size=world_size, seed=seed,
                           shuffle=shuffle)
    sampler.set_epoch(epoch)
    cls = OnTheFlyBatches if d.on_the_fly else CachedBatches
    pool = cache.indices("train") if split == "train" else np.arange(len(cache))
    if split == "train" and pool.size == 0:
        pool = np.arange(len(cache))
    dataset = cls(cache, ref_seconds=d.ref_seconds, pad_multiple=d.pad_multiple,
                  seed=sampler.seed, ref_pool=pool, with_wav=with_wav and not d.on_the_fly)
    workers = d.num_workers if num_workers is None else num_workers
    persistent = (split == "train") if persistent_workers is None else persistent_workers
    persistent = persistent and workers > 0
    fork = sys.platform.startswith("linux")  # fork is the safe default there, not on macOS
    ring = None
    if persistent and fork and len(sampler.buckets):
        # Slots for every batch the DataLoader keeps in flight, plus the one being copied out.
        # Only with persistent workers: a new iterator then drains the old one's tasks first.
        biggest = max(SlotRing.nbytes(dataset.layout(_plan_of(b)._replace(wide=True)))
                      for b in sampler.buckets)
        ring = SlotRing(d.prefetch_factor * workers + 2, biggest)
        dataset.ring = ring
    loader = DataLoader(
        dataset, batch_size=None, sampler=_SlotSampler(sampler, ring), num_workers=workers,
        pin_memory=False,  # the BatchLoader thread pins (out of the ring) itself
        persistent_workers=persistent,
        prefetch_factor=d.prefetch_factor if workers > 0 else None,
        worker_init_fn=_worker_init if workers > 0 else None,
        multiprocessing_context="fork" if workers > 0 and fork else None)
    return BatchLoader(loader, sampler, ring, pin=d.pin_memory and torch.cuda.is_available())


def _plan_of(bucket) -> BatchPlan:
    return BatchPlan(np.zeros(bucket.batch_size, np.int64), 0, bucket.mel_len, bucket.text_len, 0, 0)


def _worker_init(_: int) -> None:
    torch.set_num_threads(1)  # workers copy arrays; threads would only fight the trainer
    ignore_stop_signals()  # SIGINT/SIGTERM to the process group: the trainer decides


def otf_mel(cache, cfg: Config, with_wav: bool = False) -> OnTheFlyMel | None:
    """The device-side mel transform on-the-fly mode needs (None in cached mode)."""
    return OnTheFlyMel(cache.audio_cfg, with_wav=with_wav) if cfg.data.on_the_fly else None


class DevicePrefetcher:
    """Iterates ``loader`` with batch N+1 already on ``device`` when step N asks for it.

    On CUDA the copy of N+1 is issued on a side stream (non_blocking from pinned memory) right
    after batch N is handed out, so it overlaps step N; the consumer's stream waits on that
    stream (no host sync) and every tensor is ``record_stream``-ed so the caching allocator does
    not reuse its memory while the step still reads it. On CPU it is a pass-through.

    ``last_wait_s``: seconds the consumer was blocked in the last ``next()``: the loader not
    having the batch ready plus the (host-side) cost of issuing the copy. ``total_wait_s`` sums
    them; input-bound % = total_wait_s / wall time (docs/design.md, "How we measure").

    ``planned=True`` (a BatchLoader only) yields ``(batch, plan)``: each batch with its BatchPlan.
    """

    def __init__(self, loader, device, transform=None, planned: bool = False):
        self.loader, self.device, self.planned = loader, torch.device(device), planned
        self.transform = transform.to(self.device) if isinstance(transform, torch.nn.Module) else transform
        self.cuda = self.device.type == "cuda"
        self.stream = torch.cuda.Stream(self.device) if self.cuda else None
        self.last_wait_s = self.total_wait_s = 0.0
        self.batches = 0
        self._it = None
        self._next = None

    def _load(self):
        try:
            item = next(self._it)
        except StopIteration:
            return None
        host, plan = item if self.planned else (item, None)
        if not self.cuda:
            return (self.transform(host) if self.transform is not None else host), plan
        with torch.cuda.stream(self.stream):
            batch = widen({k: v.to(self.device, non_blocking=True) for k, v in host.items()})
            return (self.transform(batch) if self.transform is not None else batch), plan

    def __iter__(self):
        # On CUDA, fetch the compact form: half the bytes to pin and copy, widened on the GPU.
        compact = self.cuda and hasattr(self.loader, "iter_compact")
        if self.planned:
            self._it = self.loader.iter_planned(compact)
        else:
            self._it = self.loader.iter_compact() if compact else iter(self.loader)
        self._next = None
        return self

    def __next__(self):
        t0 = time.perf_counter()
        if self._it is None:
            iter(self)
        item = self._next if self._next is not None else self._load()
        if item is None:
            self._it = None
            raise StopIteration
        batch, plan = item
        if self.cuda:
            current = torch.cuda.current_stream(self.device)
            current.wait_stream(self.stream)
            for v in batch.values():
                if torch.is_tensor(v):
                    v.record_stream(current)
        self._next = self._load()  # fetch + issue the copy of N+1; it overlaps step N
        self.last_wait_s = time.perf_counter() - t0
        self.total_wait_s += self.last_wait_s
        self.batches += 1
        return (batch, plan) if self.planned else batch


class BatchStream:
    """Endless batches for the trainer: epochs follow each other with no gap (the sampler runs
    on into the next epoch, so the loader never drains at a boundary), and ``state_dict()`` is
    the position of the batches *handed out* (not of what workers prefetched), so a resumed run
    continues with exactly the batch the interrupted one would have trained on next.

    ``next(stream)`` is ``(batch, plan)``: the device tensors and the BatchPlan they were built
    from, which tells the caller the batch's rows without a device sync."""

    def __init__(self, loader: BatchLoader, device="cpu", transform=None):
        self.loader, self.sampler = loader, loader.sampler
        self.device, self.transform = device, transform
        self.epoch, self.position = self.sampler.epoch, self.sampler.state_dict()["position"]
        self.epoch_len = len(self.sampler)
        self._pf: DevicePrefetcher | None = None

    def state_dict(self) -> dict:
        state = self.sampler.state_dict()  # seed, world size, fingerprint of the data
        state.update(epoch=self.epoch, position=self.position)
        return state

    def load_state_dict(self, state: dict) -> None:
        self.close()
        self.sampler.load_state_dict(state)
        self.epoch, self.position = self.sampler.epoch, self.sampler.state_dict()["position"]

    def _start(self) -> None:
        if self.epoch_len == 0:
            raise ValueError("the split has no utterances; nothing to train on")
        if self.position >= self.epoch_len:
            self.epoch, self.position = self.epoch + 1, 0
        if hasattr(self.loader, "stop"):
            self.loader.stop()  # a previous pass must not advance the sampler any more
        self.sampler.infinite = True
        self.sampler.seek(self.epoch, self.position)
        self._pf = iter(DevicePrefetcher(self.loader, self.device, self.transform, planned=True))

    def __iter__(self):
        return self

    def __next__(self):
        if self._pf is None:
            self._start()
        item = next(self._pf)
        self.position += 1
        if self.position == self.epoch_len:
            self.epoch, self.position = self.epoch + 1, 0
        return item

    @property
    def last_wait_s(self) -> float:
        return self._pf.last_wait_s if self._pf else 0.0

    @property
    def total_wait_s(self) -> float:
        return self._pf.total_wait_s if self._pf else 0.0

    def close(self) -> None:
        """Drop the running iterator (workers of a persistent loader stay up for reuse)."""
        self._pf = None
