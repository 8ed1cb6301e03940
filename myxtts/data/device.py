"""The device side of the batch path: batches on the device before the step asks, and the
trainer's endless, resumable stream of them.

Both yield :class:`~myxtts.data.batch.Batch` items whose tensors are the batch contract on the
device (see :mod:`myxtts.data.features`); the plan that comes with each tells the caller the
batch's rows without reading a tensor (no device sync).
"""
from __future__ import annotations

import time

import torch

from myxtts.data.batch import Batch
from myxtts.data.features import Features


def to_device(batch: Batch, device: torch.device, features: Features) -> Batch:
    """A worker-form batch → the batch contract on ``device``, in the current stream."""
    moved = {k: v.to(device, non_blocking=True) for k, v in batch.tensors.items()}
    return Batch(batch.plan, features.finish(moved))


class DevicePrefetcher:
    """Iterates ``loader`` with batch N+1 already on ``device`` when step N asks for it.

    On CUDA the copy of N+1 is issued on a side stream (non_blocking from pinned memory) right
    after batch N is handed out, so it overlaps step N; the consumer's stream waits on that
    stream (no host sync) and every tensor is ``record_stream``-ed so the caching allocator does
    not reuse its memory while the step still reads it. On CPU it is a pass-through.

    ``last_wait_s``: seconds the consumer was blocked in the last ``next()``: the loader not
    having the batch ready plus the (host-side) cost of issuing the copy. ``total_wait_s`` sums
    them; input-bound % = total_wait_s / wall time (docs/design.md, "How we measure").
    """

    def __init__(self, loader, device):
        self.loader, self.device = loader, torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.stream = torch.cuda.Stream(self.device) if self.cuda else None
        self.last_wait_s = self.total_wait_s = 0.0
        self.batches = 0
        self._it = None
        self._next = None

    def _load(self) -> Batch | None:
        try:
            batch = next(self._it)
        except StopIteration:
            return None
        if not self.cuda:
            return batch  # finished by the loader's host thread
        with torch.cuda.stream(self.stream):
            return to_device(batch, self.device, self.loader.features)

    def __iter__(self):
        # On CUDA, fetch the worker form (half the bytes to pin and copy) and finish it on the
        # GPU; on a CPU the loader's host thread finishes it, off the training thread.
        self._it = self.loader.iterate(None if self.cuda else self.loader.features.finish)
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
        if self.cuda:
            current = torch.cuda.current_stream(self.device)
            current.wait_stream(self.stream)
            for v in item.tensors.values():
                v.record_stream(current)
        self._next = self._load()  # fetch + issue the copy of N+1; it overlaps step N
        self.last_wait_s = time.perf_counter() - t0
        self.total_wait_s += self.last_wait_s
        self.batches += 1
        return item


class BatchStream:
    """Endless batches for the trainer: epochs follow each other with no gap (the sampler runs
    on into the next epoch, so the loader never drains at a boundary), and ``state_dict()`` is
    the position of the batches *handed out* (not of what workers prefetched), so a resumed run
    continues with exactly the batch the interrupted one would have trained on next.

    ``next(stream)`` is a :class:`Batch` on the device."""

    def __init__(self, loader, device="cpu"):
        self.loader, self.sampler = loader, loader.sampler
        self.device = device
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
        self.loader.stop()  # a previous pass must not advance the sampler any more
        self.sampler.infinite = True
        self.sampler.seek(self.epoch, self.position)
        self._pf = iter(DevicePrefetcher(self.loader, self.device))

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
