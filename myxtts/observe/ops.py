"""ATen operations a training step dispatches, and the host syncs among them
(docs/design.md, "Operations per step").

An eager step on a GPU launches roughly one kernel per ATen op, each costing the host a few
microseconds to dispatch. When kernels are short, that launch cost, not the GPU, sets the step
time, so the number of ops per step is a device-independent measure of launch overhead: counted
with a ``TorchDispatchMode`` on any device, the CPU included.

Host syncs are ops that hand a device value back to the host (``.item()``, ``bool(tensor)``,
``nonzero``, boolean indexing) and copies of tensors to the host (``.cpu()``, ``.to("cpu")``,
``.numpy()``, ``.tolist()``): each one makes the host wait for the GPU to drain, and a step with
none can be queued ahead while the previous one runs. On a CPU a copy to the host is free and
dispatches no op, so copies are caught one level up, as the Python calls that ask for them
(a ``TorchFunctionMode``); ops that a custom op runs inside its own CPU kernel are not the
step's (on a GPU the kernel is a Triton one), and neither mode sees them.

    ops = count_step_ops(run.step_fn, batch)   # after one warm-up step
    ops.total, ops.syncs
"""
from __future__ import annotations

import collections
import contextlib
import warnings
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

# Ops whose result the host must read: on a GPU each blocks until the device catches up.
SYNC_OPS = frozenset({"aten._local_scalar_dense", "aten.item", "aten.nonzero", "aten.masked_select",
                      "aten.is_nonzero", "aten.equal", "aten._assert_async",
                      "aten.nonzero_static", "aten.unique", "aten._unique2", "aten.repeat_interleave"})


# Tensor methods that copy a tensor to the host (named as counted: "Tensor.cpu", ...).
HOST_COPIES = frozenset({"cpu", "numpy", "tolist", "__array__"})


class HostCopyCounter(TorchFunctionMode):
    """Counts the calls inside the ``with`` block that copy a tensor to the host: ``HOST_COPIES``
    and ``.to()`` onto the CPU from another device or named as "cpu" (on a CPU-only machine
    ``x.to(y.device)`` is not one, as it would not be on a GPU)."""

    def __init__(self):
        super().__init__()
        self.counts: collections.Counter = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in HOST_COPIES or (name == "to" and _to_host(args, kwargs)):
            self.counts[f"Tensor.{name}"] += 1
        return func(*args, **kwargs)


def _to_host(args, kwargs) -> bool:
    if not args or not isinstance(args[0], torch.Tensor):
        return False
    named = [a for a in (*args[1:], kwargs.get("device")) if isinstance(a, str)]
    device = torch._C._nn._parse_to(*args[1:], **kwargs)[0]
    return device is not None and device.type == "cpu" and (
        args[0].device.type != "cpu" or any(n.startswith("cpu") for n in named))


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
    host_copies: dict = field(default_factory=dict)  # "Tensor.cpu" etc. → times called

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def syncs(self) -> dict:
        """Host-sync ops and copies to the host, and how often each ran."""
        return {**{k: v for k, v in self.counts.items() if k in SYNC_OPS}, **self.host_copies}


def count_step_ops(step_fn, batch: dict, micro_batches: int = 1) -> StepOps:
    """ATen ops of one optimizer step (forward, losses, backward, clipping, optimizer, schedule)
    of ``step_fn`` (a ``TrainStep``) over ``micro_batches`` copies of ``batch``.

    Run it on an eager step after a warm-up step, so that one-off work (the optimizer's state
    allocation) is not counted. The step updates the weights, as any training step does.
    The backward's ops are counted too: autograd carries the calling thread's dispatch modes
    into the threads that run it; it does not carry function modes, so copies to the host are
    seen in the forward, the losses and the optimizer, not inside a custom backward."""
    with OpCounter() as counter, HostCopyCounter() as copies:
        step_fn([batch] * micro_batches)
    return StepOps(dict(counter.counts), dict(copies.counts))


@dataclass
class SyncCount:
    """Result of ``count_host_syncs``: ``count`` is None where it cannot be measured (no CUDA)."""
    count: int | None = None
    reason: str = ""


@contextlib.contextmanager
def count_host_syncs():
    """Count synchronising CUDA calls (``.item()``, ``.cpu()``, ``nonzero`` ...) inside the block,
    on a GPU, with torch's sync debug mode, which warns on every one; for a few steps of
    ``profile`` or ``doctor``, not for the training loop (the warning path is slow)."""
    res = SyncCount()
    if not torch.cuda.is_available():
        res.reason = "no CUDA device"
        yield res
        return
    prev = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield res
        finally:
            torch.cuda.set_sync_debug_mode(prev)
            res.count = sum("synchroniz" in str(w.message) for w in caught)
