"""What a batch is to be (:class:`BatchPlan`, the sampler's) and what it is (:class:`Batch`).

One form travels from the loader worker to the training step: the plan the sampler made and the
tensors built from it, together. The tensors change place and form on the way (worker form in
shared memory, then the batch contract on the device: see :mod:`myxtts.data.features`); the plan
rides along, so every stage knows the batch's rows, shape and real frames from the host without
reading a tensor (no device sync).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch


class BatchPlan(NamedTuple):
    """One batch as the sampler plans it: which rows, in which shape."""
    indices: np.ndarray  # (B,) cache indices; [:n_real] real rows, [n_real:] filler
    n_real: int
    mel_len: int  # Tm
    text_len: int  # Tt
    epoch: int  # seeds the per-epoch reference choice
    bucket: int
    frames: int  # unpadded mel frames of all B rows (filler rows are trained on too)
    slot: int | None = None  # shared-memory slot to write into (assigned by the loader)

    @property
    def shape(self) -> tuple[int, int, int]:
        """(B, Tt, Tm), as the sampler's ``shapes()`` names it."""
        return (len(self.indices), self.text_len, self.mel_len)


@dataclass
class Batch:
    plan: BatchPlan
    tensors: dict[str, torch.Tensor]  # the worker form, or (after ``finish``) the batch contract

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.plan.shape

    @property
    def frames(self) -> int:
        return self.plan.frames

    @property
    def samples(self) -> int:
        return len(self.plan.indices)
