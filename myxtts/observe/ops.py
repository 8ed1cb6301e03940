"""ATen operations a training step dispatches, and the host syncs among them
(docs/design.md, "Operations per step").

An eager step on a GPU launches roughly one kernel per ATen op, each costing the host a few
microseconds to dispatch. When kernels are short, that launch cost, not the GPU, sets the step
time, so the number of ops per step is a device-independent measure of launch overhead: counted
with a ``TorchDispatchMode`` on any device, the CPU included.

Host syncs are ops that hand a device value back to the host (``.item()``, ``bool(tensor)``,
``nonzero``, boolean indexing): each one makes the host wait for the GPU to drain, and a step
with none can be queued ahead while the previous one runs.

    ops = count_step_ops(run.step_fn, batch)   # after one warm-up step
    ops.total, ops.syncs, ops.top(10)
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field

from torch.utils._python_dispatch import TorchDispatchMode

# Ops whose result the host must read: on a GPU each blocks until the device catches up.
SYNC_OPS = frozenset({"aten._local_scalar_dense", "aten.item", "aten.nonzero", "aten.masked_select",
                      "aten.is_nonzero", "aten.equal", "aten._assert_async",
                      "aten.nonzero_static", "aten.unique", "aten._unique2", "aten.repeat_interleave"})


class OpCounter(TorchDispatchMode):
    """Counts every ATen op dispatched inside the ``with`` block, by overload packet name."""

    def __init__(self):
        super().__init__()
        self.counts: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


@dataclass
class StepOps:
    counts: dict = field(default_factory=dict)  # op name → times dispatched

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def syncs(self) -> dict:
        """Host-sync ops and how often each ran."""
        return {k: v for k, v in self.counts.items() if k in SYNC_OPS}

    def top(self, n: int = 10) -> list[tuple[str, int]]:
        return collections.Counter(self.counts).most_common(n)


def count_step_ops(step_fn, batch: dict, micro_batches: int = 1) -> StepOps:
    """ATen ops of one optimizer step (forward, losses, backward, clipping, optimizer, schedule)
    of ``step_fn`` (a ``TrainStep``) over ``micro_batches`` copies of ``batch``.

    Run it on an eager step after a warm-up step, so that one-off work (the optimizer's state
    allocation) is not counted. The step updates the weights, as any training step does.
    The backward's ops are counted too: autograd carries the calling thread's dispatch modes
    into the threads that run it."""
    with OpCounter() as counter:
        step_fn([batch] * micro_batches)
    return StepOps(dict(counter.counts))
