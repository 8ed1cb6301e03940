"""Device memory, defined once: the caching allocator's figures for one CUDA device.

Peak memory is the allocator's peak *reserved* bytes (``reserved_bytes.all.peak`` of
``torch.cuda.memory_stats``, what ``max_memory_reserved`` returns), as a share of the device's
capacity. Reserved, not allocated: it is what the process holds from the driver, fragmentation
and the allocator's cache included, so it is what runs out, and what ``data.frame_budget=auto``
sizes against (85 % of the free memory). NVML's "used" memory adds the CUDA context and every
other process on the device, so it is no measure of what this run needs.

Beside the peak: the peak of *active* bytes (what tensors really held), the allocator's retries
(a request that failed, made the allocator free its cache and try again: a run close to the
limit, slowed down by it) and the out-of-memory errors it raised. The figures count from the last
``reset`` (the training loop resets at its start, so the batch-size probes, which run out of
memory on purpose, are not counted). torchtitan's ``DeviceMemStats`` reports the same six.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

GIB = 2**30


@dataclass(frozen=True)
class DeviceMemory:
    capacity_gib: float
    reserved_peak_gib: float   # the peak memory: what every report calls it
    reserved_peak_pct: float   # ... as a share of capacity
    active_peak_gib: float     # the peak of bytes held by live tensors
    alloc_retries: int         # cudaMalloc failed, the cache was freed and the request retried
    ooms: int                  # out-of-memory errors the allocator raised

    @classmethod
    def from_stats(cls, stats: dict | None, capacity_bytes: int) -> DeviceMemory | None:
        """The figures of a ``torch.cuda.memory_stats()`` dict; None where the allocator has
        nothing to say (no CUDA device, or nothing allocated yet: the dict is then empty)."""
        if not stats or not capacity_bytes:
            return None
        reserved = stats.get("reserved_bytes.all.peak", 0)
        return cls(capacity_gib=capacity_bytes / GIB, reserved_peak_gib=reserved / GIB,
                   reserved_peak_pct=100.0 * reserved / capacity_bytes,
                   active_peak_gib=stats.get("active_bytes.all.peak", 0) / GIB,
                   alloc_retries=int(stats.get("num_alloc_retries", 0)), ooms=int(stats.get("num_ooms", 0)))

    @classmethod
    def from_dict(cls, d: dict | None) -> DeviceMemory | None:
        return cls(**d) if d else None

    def as_dict(self) -> dict:
        return asdict(self)

    def text(self) -> str:
        """``peak memory 61.2 GiB (77 % of 79.1 GiB, allocator), 0 allocator retries, 0 OOMs``."""
        return (f"peak memory {self.reserved_peak_gib:.1f} GiB ({self.reserved_peak_pct:.0f} % of "
                f"{self.capacity_gib:.1f} GiB reserved by the allocator), {self.alloc_retries} allocator "
                f"retries, {self.ooms} OOMs")


def read_memory(device: torch.device) -> DeviceMemory | None:
    """The figures since the last ``reset`` on ``device``; None off CUDA."""
    if device.type != "cuda":
        return None
    return DeviceMemory.from_stats(torch.cuda.memory_stats(device),
                                   torch.cuda.get_device_properties(device).total_memory)


def reset(device: torch.device) -> None:
    """Start counting: peaks from what is reserved now, retries and OOMs from zero."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        torch.cuda.reset_accumulated_memory_stats(device)
