"""torchrun integration: one process per GPU (or CPU process with gloo), nothing else.

The model code never imports torch.distributed; this module wraps it from outside. Every rank
trains on its own disjoint share of batches; rank 0 alone writes checkpoints and logs. A rank
that stops arriving is named by ``train.watchdog``; on NCCL, torch's own watchdog and flight
recorder are on as well (``flight_recorder``).
"""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    store: object = None  # the group's key-value store, this attempt's keys (the stall watchdog's too)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def setup(trace: Path) -> DistInfo:
    """Join the process group when launched by torchrun (RANK/WORLD_SIZE set), else no-op.
    ``trace``: where NCCL's flight recorder dumps (``RunDir.nccl_trace``)."""
    if "RANK" not in os.environ or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return DistInfo()
    info = DistInfo(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]),
                    int(os.environ.get("LOCAL_RANK", "0")))
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(info.local_rank)
        flight_recorder(trace)
    timeout = datetime.timedelta(minutes=30)
    store, _, _ = next(dist.rendezvous("env://", info.rank, info.world_size, timeout=timeout))
    # torchrun keeps one store for every attempt of a group it restarts (--max-restarts): keys
    # of our own per attempt, or a restarted group can read the previous attempt's gloo
    # addresses and never connect (seen in 2 restarts of 4, two CPU processes, torch 2.13).
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    info.store = dist.PrefixStore(f"myxtts/attempt-{attempt}/", store)
    dist.init_process_group(backend, store=info.store, rank=info.rank, world_size=info.world_size,
                            timeout=timeout)
    return info


def flight_recorder(trace: Path) -> None:
    """Switch on torch's NCCL watchdog and flight recorder before the group exists (torch reads
    them then): a collective that times out dumps its last collectives, per rank, to
    ``trace`` + the rank. Settings a user gave win."""
    trace.parent.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")  # abort the communicator, end the process
    os.environ.setdefault("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")  # collectives kept, per rank
    os.environ.setdefault("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")
    os.environ.setdefault("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", str(trace))


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
