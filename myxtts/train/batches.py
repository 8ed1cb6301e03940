"""The trainer's view of the data: endless training batches on the device, the validation
split, the shapes the step will see, and the resume state. Wraps data.loader and data.device."""
from __future__ import annotations

import torch

from myxtts.data.batch import Batch, BatchPlan
from myxtts.data.device import BatchStream, DevicePrefetcher, to_device
from myxtts.data.loader import make_loader


class Batches:
    def __init__(self, cache, cfg, device: torch.device, info, with_wav: bool = False,
                 with_voice: bool | None = None):
        self.cache, self.cfg, self.device, self.info = cache, cfg, device, info
        self.with_wav, self.with_voice = with_wav, with_voice
        self.loader = make_loader(cache, cfg, "train", rank=info.rank, world_size=info.world_size,
                                  with_wav=with_wav, with_voice=with_voice)
        self.sampler = self.loader.sampler
        self.stream = BatchStream(self.loader, device)
        self.shapes = self.sampler.shapes()
        self.padding_pct = float(self.sampler.padding_report()["mel_padding_pct"])

    def next(self) -> Batch:
        # Starting a DataLoader iterator draws a seed from the global RNG, which would shift the
        # model's dropout stream after a resume (the uninterrupted run drew it at step 1);
        # loading data must never touch the training run's randomness.
        with torch.random.fork_rng(devices=[]):
            return next(self.stream)

    @property
    def last_wait_s(self) -> float:
        return self.stream.last_wait_s

    def validation(self):
        """The held-out split, once through, on the device (same shapes as training)."""
        if self.cache.indices("val").size == 0:
            return
        loader = make_loader(self.cache, self.cfg, "val", rank=self.info.rank,
                             world_size=self.info.world_size, num_workers=0, with_wav=self.with_wav,
                             with_voice=self.with_voice)
        yield from DevicePrefetcher(loader, self.device)

    def state_dict(self) -> dict:
        return self.stream.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.stream.load_state_dict(state)


class BucketBatches:
    """Device batches of any plan, built in this process (no loader workers)."""

    def __init__(self, cache, cfg, device: torch.device):
        self.device = device
        self.dataset = make_loader(cache, cfg, "train", num_workers=0).dataset

    def device_batch(self, plan: BatchPlan) -> Batch:
        return to_device(self.dataset[plan], self.device, self.dataset.features)
