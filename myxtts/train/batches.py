"""The trainer's view of the data: endless training batches on the device, the validation
split, the shapes the step will see, and the resume state. Wraps data.loader."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from myxtts.data.dataset import widen
from myxtts.data.loader import BatchStream, DevicePrefetcher, make_loader, otf_mel
from myxtts.data.sampler import BatchPlan


@dataclass
class Batch:
    tensors: dict  # device tensors (the batch contract of data.dataset), tensors only
    frames: int    # real mel frames, counted on the host from the plan (no device sync)
    samples: int
    shape: tuple = ()  # (B, Tt, Tm): the batch shape, as the sampler's shapes() name it

    @classmethod
    def of(cls, tensors: dict, plan: BatchPlan, n_frames: np.ndarray) -> Batch:
        """The batch a plan made; ``n_frames``: the cache's frames per utterance."""
        return cls(tensors, int(np.sum(n_frames[plan.indices])), len(plan.indices),
                   (len(plan.indices), plan.text_len, plan.mel_len))


class Batches:
    def __init__(self, cache, cfg, device: torch.device, info, with_wav: bool = False):
        self.cache, self.cfg, self.device, self.info = cache, cfg, device, info
        self.with_wav = with_wav
        self.loader = make_loader(cache, cfg, "train", rank=info.rank, world_size=info.world_size,
                                  with_wav=with_wav)
        self.sampler = self.loader.sampler
        self.transform = otf_mel(cache, cfg, with_wav=with_wav)
        self.stream = BatchStream(self.loader, device, transform=self.transform)
        self.shapes = self.sampler.shapes()
        self.padding_pct = float(self.sampler.padding_report()["mel_padding_pct"])

    def next(self) -> Batch:
        # Starting a DataLoader iterator draws a seed from the global RNG, which would shift the
        # model's dropout stream after a resume (the uninterrupted run drew it at step 1);
        # loading data must never touch the training run's randomness.
        with torch.random.fork_rng(devices=[]):
            tensors, plan = next(self.stream)
        return Batch.of(tensors, plan, self.cache.n_frames)

    @property
    def last_wait_s(self) -> float:
        return self.stream.last_wait_s

    def validation(self):
        """The held-out split, once through, on the device (same shapes as training)."""
        if self.cache.indices("val").size == 0:
            return
        loader = make_loader(self.cache, self.cfg, "val", rank=self.info.rank,
                             world_size=self.info.world_size, num_workers=0, with_wav=self.with_wav)
        for tensors in DevicePrefetcher(loader, self.device, self.transform):
            yield Batch(tensors, 0, 0)

    def state_dict(self) -> dict:
        return self.stream.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.stream.load_state_dict(state)


def bucket_plan(sampler, b: int, epoch: int = 0) -> BatchPlan:
    """A full batch of bucket ``b``'s shape from its own members (repeated if it has fewer)."""
    bk = sampler.buckets[b]
    members = np.flatnonzero(sampler.bucket_of == b)
    if members.size == 0:
        members = np.flatnonzero(sampler.bucket_of >= 0)[:1]
    rows = np.resize(members, bk.batch_size)
    return BatchPlan(rows, min(members.size, bk.batch_size), bk.mel_len, bk.text_len, epoch, b)


def shape_plans(sampler) -> list[BatchPlan]:
    """One plan per shape of ``sampler.shapes()``, in its order: the first batch of that shape in
    epoch 0 (real rows), or a bucket's full batch from its members where the split has none."""
    first: dict = {}
    for p in sampler.global_plan(0):
        first.setdefault((len(p.indices), p.text_len, p.mel_len), p)
    full = {bk.shape: b for b, bk in enumerate(sampler.buckets)}
    return [first.get(shape) or bucket_plan(sampler, full[shape]) for shape in sampler.shapes()]


class BucketBatches:
    """Device batches of any plan, built in this process (no loader workers)."""

    def __init__(self, cache, cfg, device: torch.device):
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
