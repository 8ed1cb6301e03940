"""torchrun integration: one process per GPU (or CPU process with gloo), nothing else.

The model code never imports torch.distributed; this module wraps it from outside. Every rank
trains on its own disjoint share of batches; rank 0 alone writes checkpoints and logs.
"""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def setup() -> DistInfo:
    """Join the process group when launched by torchrun (RANK/WORLD_SIZE set), else no-op."""
    if "RANK" not in os.environ or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return DistInfo()
    info = DistInfo(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]),
                    int(os.environ.get("LOCAL_RANK", "0")))
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(info.local_rank)
    dist.init_process_group(backend, timeout=datetime.timedelta(minutes=30))
    return info


def wrap(model: torch.nn.Module, info: DistInfo, device: torch.device) -> torch.nn.Module:
    if not info.enabled:
        return model
    ids = [device.index] if device.type == "cuda" else None
    # Every parameter gets a gradient in every step (no unused branches), so the cheaper
    # find_unused_parameters=False holds; static_graph lets DDP reuse its bucket plan.
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids, static_graph=True)


def all_reduce_mean(t: torch.Tensor, info: DistInfo) -> torch.Tensor:
    if info.enabled:
        t = t.clone()
        dist.all_reduce(t)
        t /= info.world_size
    return t


def any_flag(flag: bool, info: DistInfo, device: torch.device) -> bool:
    """True on every rank if any rank raised it (a signal reaching one rank stops them all)."""
    if not info.enabled:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def teardown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
