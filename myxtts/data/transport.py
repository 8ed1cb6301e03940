"""From loader workers to the host: shared-memory slots, the worker's answers, the host thread.

A worker answers each plan with a :class:`~myxtts.data.batch.Batch`, a :class:`SlotRef` (the
batch was written into a slot of the loader's :class:`SlotRing`) or a :class:`BatchError`. A
host thread (like the DataLoader's pin-memory thread, on CPU too) turns every answer into a
Batch whose tensors own their memory (pinned when the consumer is a GPU), frees the slot, runs
the features' ``finish`` where the batch is consumed on the CPU, and keeps a few batches ready,
so the training thread only ever pops a finished batch.
"""
from __future__ import annotations

import collections
import math
import mmap
import threading
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from torch.utils.data import get_worker_info

from myxtts.data.batch import Batch, BatchPlan
from myxtts.data.sampler import round_up
from myxtts.errors import UserError

Finish = Callable[[dict], dict]  # a Features strategy's finish


def empty(shape, dtype: torch.dtype) -> torch.Tensor:
    """Uninitialised tensor; in a loader worker allocated in shared memory (no copy on send)."""
    if get_worker_info() is None:
        return torch.empty(shape, dtype=dtype)
    elem = torch.empty(0, dtype=dtype)
    storage = elem._typed_storage()._new_shared(math.prod(shape), device="cpu")
    return elem.new(storage).resize_(*shape)


class SlotRing:
    """Batch-sized slots of anonymous shared memory, mapped before the workers fork.

    Writing a batch into memory that was already written before costs a plain memcpy; writing
    into a fresh shared-memory segment (what DataLoader workers normally do, one per tensor per
    batch) first faults in and zeroes every page, several times slower on a VM. The sampler side
    acquires a slot per dispatched batch, the consumer side releases it once copied out; when
    none is free (never, with n_slots > batches in flight) the batch falls back to fresh memory.
    """

    ALIGN = 64

    def __init__(self, n_slots: int, slot_bytes: int):
        self.n_slots, self.slot_bytes = n_slots, int(round_up(max(slot_bytes, 1), 4096))
        self.buf = mmap.mmap(-1, n_slots * self.slot_bytes)  # MAP_SHARED | MAP_ANONYMOUS
        self._free = collections.deque(range(n_slots))
        self._lock = threading.Lock()

    @classmethod
    def nbytes(cls, layout) -> int:
        return sum(round_up(math.prod(shape) * _itemsize(dt), cls.ALIGN) for _, dt, shape in layout)

    def views(self, slot: int, layout) -> dict[str, torch.Tensor]:
        out, offset = {}, slot * self.slot_bytes
        for name, dtype, shape in layout:
            n = math.prod(shape)
            out[name] = torch.frombuffer(self.buf, dtype=dtype, count=n, offset=offset).view(shape)
            offset += round_up(n * _itemsize(dtype), self.ALIGN)
        return out

    def acquire(self) -> int | None:
        with self._lock:
            return self._free.popleft() if self._free else None

    def release(self, slot: int) -> None:
        with self._lock:
            self._free.append(slot)

    def reset(self) -> None:
        with self._lock:
            self._free = collections.deque(range(self.n_slots))


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty(0, dtype=dtype).element_size()


class SlotRef(NamedTuple):
    """A worker's answer when it wrote the batch into a slot of the loader's ring: the batch is
    the plan and the slot's tensors."""
    plan: BatchPlan


class BatchError(NamedTuple):
    """A worker's answer when the batch cannot be built for a reason the user can fix. The
    loader raises it as a UserError in the main process: a DataLoader would re-raise the
    worker's exception with the worker's traceback pasted into its message."""
    message: str
    plan: BatchPlan


def single_threaded_copy(v: torch.Tensor, pin: bool = False) -> torch.Tensor:
    """A CPU copy of ``v`` in memory of its own (pinned if asked), made by numpy.

    numpy copies on the calling thread. torch splits a large copy over its intra-op pool, and
    when another process holds one of the cores (loader workers, a shared machine) the whole
    copy waits for the descheduled thread: 16 ms instead of 0.8 ms for 4 MB on 2 busy cores."""
    dst = torch.empty(v.shape, dtype=v.dtype, pin_memory=pin)
    np.copyto(dst.numpy(), v.numpy())
    return dst


class HostIter:
    """One pass (or, with an infinite sampler, an endless run) over a loader, as Batches.

    The hand-over is a deque, not a queue.Queue: when a batch is ready the consumer pops it
    without touching a lock (a lock or condition operation right after the training thread
    wakes costs 20-45 us on a VM, a measurable share of a few-ms step). The host thread keeps
    up to DEPTH batches ready and polls for room; it signals an Event only for a consumer that
    found the deque empty."""

    DEPTH = 3  # ready batches; polled every ms, so enough for steps down to ~0.5 ms

    def __init__(self, loader, it, finish: Finish | None):
        """``it``: the DataLoader's iterator over ``loader``'s plans, started by the caller."""
        self._ready: collections.deque = collections.deque()
        self._filled, self._stop = threading.Event(), threading.Event()
        # The thread holds no reference to self, so an abandoned iterator is collected, which
        # stops its thread.
        self._thread: threading.Thread | None = threading.Thread(
            target=_host_loop, args=(it, loader, finish, self._ready, self._filled, self._stop),
            name="myxtts-batches", daemon=True)
        self._thread.start()
        self.handle = (self._thread, self._stop)  # for the loader to stop this pass

    def __iter__(self):
        return self

    def __next__(self) -> Batch:
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
            return value
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


def _to_host(loader, item, finish: Finish | None) -> Batch:
    """A worker's answer → a Batch whose tensors own their memory (pinned if the loader pins),
    finished if ``finish`` is given; frees its slot."""
    if isinstance(item, BatchError):  # the worker's one-line message, without its traceback
        if item.plan.slot is not None and loader.ring is not None:
            loader.ring.release(item.plan.slot)
        raise UserError(item.message)
    in_ring = isinstance(item, SlotRef)
    src = loader.ring.views(item.plan.slot, loader.dataset.layout(item.plan)) if in_ring else item.tensors
    out = finish(src) if finish is not None else src  # finish makes new feature tensors, keeps the others
    # Copy what still lives in the ring (or everything, into pinned memory when pinning).
    out = {k: single_threaded_copy(v, loader.pin) if loader.pin or (in_ring and v is src.get(k)) else v
           for k, v in out.items()}
    if in_ring:
        loader.ring.release(item.plan.slot)
    return Batch(item.plan, out)


def _host_loop(it, loader, finish: Finish | None, ready: collections.deque,
               filled: threading.Event, stop: threading.Event) -> None:
    def hand_over(entry) -> bool:
        while len(ready) >= HostIter.DEPTH:  # full: poll; the consumer takes no lock to signal
            if stop.wait(0.001):
                return False
        ready.append(entry)
        filled.set()
        return not stop.is_set()

    try:
        for item in it:
            if not hand_over(("batch", _to_host(loader, item, finish))):
                return
        hand_over(("end", None))
    except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
        hand_over(("error", e))
