"""The trainer's view of the data: endless training batches on the device, the validation
split, the shapes the step will see, and the resume state. Wraps data.loader."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from myxtts.data.loader import BatchStream, DevicePrefetcher, make_loader, otf_mel


@dataclass
class Batch:
    tensors: dict  # device tensors (the batch contract of data.dataset), tensors only
    frames: int    # real mel frames, counted on the host from the plan (no device sync)
    samples: int


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
        plan = self.sampler.plan(self.stream.epoch if self.stream.position < self.stream.epoch_len
                                 else self.stream.epoch + 1)
        rows = plan[self.stream.position % self.stream.epoch_len].indices
        # Starting a DataLoader iterator draws a seed from the global RNG, which would shift the
        # model's dropout stream after a resume (the uninterrupted run drew it at step 1);
        # loading data must never touch the training run's randomness.
        with torch.random.fork_rng(devices=[]):
            tensors = next(self.stream)
        return Batch(tensors, int(np.sum(self.cache.n_frames[rows])), len(rows))

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
