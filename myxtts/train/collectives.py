"""Per-rank figures under DDP: how long each rank waits for the gradient all-reduce, and the
figures every rank hands to rank 0 on logging steps and at the end.

A rank slower than the others (a slower or throttled GPU, a busier host, a slower disk) shows
on the *others* as waiting: each rank hands its gradients to the all-reduce bucket by bucket
during its backward, and a bucket's all-reduce finishes only once every rank has handed it in.
``CollectiveTimer`` is a DDP communication hook (torch's reference ``allreduce_hook``: the same
arithmetic as DDP's built-in one) that marks, on the step timer's clock, when this rank handed
in the last bucket of its step (its backward is done: nothing is left for it to compute) and
when each bucket's all-reduce finished. The collective wait of a step is the time between the
first mark and the latest of the others (docs/design.md, "Per-rank figures"): on a CPU host
time (gloo runs the all-reduce on its own threads), on a GPU CUDA events (the hook's future
runs its callback on a stream that waits for NCCL's kernels). The marks are read lazily with the
step's own (``StepTimer.flush``), so timing the collectives adds no host sync.

The loop's own collectives (the loss all-reduce of a logging step, the stop check) are not
counted: they follow the step's all-reduce, which has just brought the ranks together.
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

# what each rank hands to rank 0: its StepTimer figures of the same window (docs/design.md)
FIGURES = ("step_ms", "collective_wait_pct", "input_bound_pct", "compute_pct")


class CollectiveTimer:
    """The DDP communication hook that marks a step's all-reduce; ``StepTimer.step_done`` takes
    the marks with ``close()``."""

    def __init__(self, clock):
        self.clock = clock
        self._ready = None   # the latest bucket handed in, this step
        self._done: list = []  # a mark per bucket whose all-reduce finished, this step

    def hook(self, group, bucket):  # no annotations: DDP checks them, and these would be strings
        """``bucket``: a ``dist.GradBucket``; returns the future of its all-reduce."""
        if self._ready is not None:
            self.clock.release(self._ready)
        self._ready = self.clock.mark()
        return allreduce_hook(group, bucket).then(self._finished)

    def _finished(self, fut: torch.futures.Future) -> torch.Tensor:
        self._done.append(self.clock.mark())  # DDP waits for this callback before the backward returns
        return fut.value()

    def close(self) -> tuple | None:
        """The step's (ready, done) marks, None where no all-reduce ran (a step under no_sync)."""
        if self._ready is None or not self._done:
            return None
        marks = (self._ready, self.clock.latest(self._done))
        self._ready, self._done = None, []
        return marks


def time_collectives(run, timer) -> None:
    """Under DDP, time the step's gradient all-reduce with ``timer``; nothing otherwise. Before
    the first backward: DDP takes a communication hook only then."""
    model = getattr(run.step_fn, "model", None)
    if run.info.enabled and isinstance(model, torch.nn.parallel.DistributedDataParallel):
        timer.collectives = CollectiveTimer(timer.clock)
        model.register_comm_hook(None, timer.collectives.hook)


def gathered(timing: dict, info, device: torch.device) -> dict:
    """``timing`` (a ``StepTimer`` window or summary) with ``ranks``: every rank's FIGURES, by
    one all_gather that every rank calls (rank 0's copy is the one written); unchanged in a
    single process."""
    if not info.enabled:
        return timing
    mine = torch.tensor([math.nan if timing.get(k) is None else float(timing[k]) for k in FIGURES],
                        dtype=torch.float64, device=device)  # (len(FIGURES),)
    every = [torch.empty_like(mine) for _ in range(info.world_size)]
    dist.all_gather(every, mine)
    rows = torch.stack(every).tolist()  # (world_size, len(FIGURES)): a logging step's host read
    timing["ranks"] = [{"rank": r, **{k: None if math.isnan(v) else v for k, v in zip(FIGURES, row)}}
                       for r, row in enumerate(rows)]
    return timing


def ranks_text(ranks: list[dict]) -> str:
    """Every rank's step time, collective wait and input-bound share in a line, as the progress
    line and the closing summary print them."""
    def n(value) -> str:
        return "n/a" if value is None else f"{value:.0f}"
    return "ranks: " + ", ".join(f"{r['rank']} {n(r['step_ms'])} ms (collective wait {n(r['collective_wait_pct'])}%, "
                                 f"input-bound {n(r['input_bound_pct'])}%)" for r in ranks)
