"""The training step: forward, losses, backward, clipping, optimizer and schedule.

Forward and loss are one function, ``forward_loss``; the step keeps it eager and, once
``train.compile.compile_step`` has it compiled (``TrainStep.compile``; AOTAutograd turns it into a
compiled forward and backward), compiled, and steps with the one ``use_compiled`` chose.
Clipping runs as foreach kernels and the update as one fused AdamW kernel per parameter group.

Nothing here reads a value back to the host. Losses are summed into device tensors and read only
when the trainer logs; a non-finite loss or gradient norm sets the fused optimizer's
``found_inf`` flag, which makes the kernel skip the update (step counter included) on the
device, and bumps two device counters (total skipped, skipped in a row) that the trainer checks
on logging steps.

Both stages' steps (this one and ``train.vocoder.VocoderStep``) meet one contract, :class:`Step`:
what the loop, the checkpoint and the measuring side use of a step, and nothing else.
"""
from __future__ import annotations

import contextlib
from typing import Protocol, runtime_checkable

import torch

from myxtts.config import TrainConfig
from myxtts.train.precision import Precision
from myxtts.train.symbolic import aten_convolutions


@runtime_checkable
class Step(Protocol):
    """One optimizer step of a stage, given its optimizer and schedule by the builder."""

    micro_batches: int  # batches one call takes (gradient accumulation)
    compile_mode: str  # off | default | cudagraphs | regional: how train.compile compiled it
    nonfinite_hint: str  # what to change when the loss stops being finite
    opt: torch.optim.Optimizer

    def __call__(self, micro_batches: list[dict]) -> None: ...

    def frames_of(self, batch) -> int: ...  # the mel frames a batch trains on (throughput)

    @property
    def lr(self) -> float: ...

    def read_window(self, reduce=None) -> dict[str, float]: ...  # losses since the last read

    def request_skipped_run(self) -> None: ...

    def skipped_run_if_ready(self) -> int | None: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


class StepCounters:
    """What every stage's step keeps on the device between logging steps: running loss sums,
    and how many updates were skipped for non-finite values (in total and in a row). Read once
    per logging step by ``read_window``: the step's only host sync."""

    def __init__(self, device: torch.device):
        self.skipped_total = torch.zeros((), dtype=torch.long, device=device)
        self.skipped_run = torch.zeros((), dtype=torch.long, device=device)
        self._sums: dict[str, torch.Tensor] = {}
        self._count = self._micro = 0

    def add(self, parts: dict[str, torch.Tensor]) -> None:
        """Sum one micro-batch's losses (device tensors)."""
        for k, v in parts.items():
            v = v.detach()
            self._sums[k] = self._sums[k] + v if k in self._sums else v.clone()
        self._micro += 1

    def step_done(self, bad: torch.Tensor, per_step: dict[str, torch.Tensor] | None = None) -> None:
        """Close an optimizer step; ``bad`` is the 0-dim device flag "this update was skipped",
        ``per_step`` values are averaged per step rather than per micro-batch."""
        for k, v in (per_step or {}).items():
            self._sums[k] = self._sums.get(k, 0) + v
        self.skipped_total += bad
        self.skipped_run = (self.skipped_run + 1) * bad
        self._count += 1

    def read_window(self, reduce=None) -> dict[str, float]:
        """Mean of each loss since the last call. ``reduce`` (e.g. a mean over DDP ranks) is
        applied to the stacked values first."""
        if not self._count:
            return {}
        keys = sorted(self._sums)
        stacked = torch.stack([self._sums[k].float() for k in keys] +
                              [self.skipped_total.float(), self.skipped_run.float()])
        values = (reduce(stacked) if reduce else stacked).tolist()
        per_step = self._per_step_keys()
        out = {k: v / (self._count if k in per_step else self._micro) for k, v in zip(keys, values)}
        out["skipped_steps"], out["skipped_in_a_row"] = int(values[-2]), int(values[-1])
        self._sums, self._count, self._micro = {}, 0, 0
        return out

    def _per_step_keys(self) -> set:
        return {"grad_norm"}

    def request_skipped_run(self) -> None:
        """Start reading the skipped-in-a-row counter without waiting for the device: on a GPU
        a non-blocking copy into pinned memory and an event; ``skipped_run_if_ready`` reads it
        once the GPU has passed the event, so the check costs no host sync."""
        if self.skipped_run.device.type != "cuda":
            self._pending_run = (self.skipped_run.clone(), None)
            return
        host = torch.empty((), dtype=torch.long, pin_memory=True)
        host.copy_(self.skipped_run, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        self._pending_run = (host, done)

    def skipped_run_if_ready(self) -> int | None:
        """The value ``request_skipped_run`` asked for, once it is on the host; None before."""
        pending = getattr(self, "_pending_run", None)
        if pending is None or (pending[1] is not None and not pending[1].query()):
            return None
        self._pending_run = None
        return int(pending[0])  # a host tensor: no device sync

    def counters_state(self) -> dict:
        return {"skipped_total": self.skipped_total.cpu(), "skipped_run": self.skipped_run.cpu()}

    def load_counters(self, state: dict) -> None:
        self.skipped_total.copy_(state["skipped_total"])
        self.skipped_run.copy_(state["skipped_run"])


class TrainStep(StepCounters):
    def __init__(self, model: torch.nn.Module, core: torch.nn.Module, optimizer, scheduler,
                 precision: Precision, cfg: TrainConfig):
        """``model`` is what runs forward (possibly DDP-wrapped); ``core`` the bare XTTS, whose
        ``losses`` method scores the output. The step runs eagerly until
        ``train.compile.compile_step`` compiles it."""
        self.model, self.core, self.opt, self.sched = model, core, optimizer, scheduler
        self.precision, self.cfg = precision, cfg
        self.scaler = precision.grad_scaler()
        self.params = [p for p in core.parameters() if p.requires_grad]
        super().__init__(precision.device)
        self.micro_batches = cfg.grad_accum
        self.compile_mode, self.compile_notes = "off", []  # set by train.compile.compile_step
        self.nonfinite_hint = "lower train.lr, check the data, or use train.precision=fp32"
        # Objects with phase(name), told where forward, backward (with clipping) and optimizer
        # (with the schedule) start: measurement from outside (train.timers, profile ranges).
        self.hooks: list = []
        self._compiled = None  # forward_loss compiled (compile): None until then
        self.compiled = False  # whether the steps run the compiled forward_loss (use_compiled)

    def forward_loss(self, batch: dict) -> dict:
        with self.precision.autocast():
            out = self.model(batch)
        return self.core.losses(batch, {k: v.float() for k, v in out.items()})

    def loss_fn(self, batch: dict) -> dict:
        """Forward and loss of one batch, compiled or eager as ``use_compiled`` last chose."""
        return (self._compiled if self.compiled else self.forward_loss)(batch)

    def compile(self, mode: str | None, backend: str | None = None) -> None:
        """Compile forward and loss as one function, with the batch size and lengths as symbols
        (torch.compile's ``mode`` and ``backend``; inductor when None), and step with it."""
        fn = torch.compile(self.forward_loss, mode=mode, dynamic=True,
                           **({"backend": backend} if backend else {}))
        self._compiled = aten_convolutions(fn) if self.precision.device.type == "cpu" else fn
        self.use_compiled(True)

    def use_compiled(self, on: bool) -> None:
        """Step with the compiled forward and loss, or the eager one: a run whose step compiles in
        a second process steps eagerly until that is done (train/compile_beside.py)."""
        if on and self._compiled is None:
            raise RuntimeError("the step has not been compiled (TrainStep.compile)")
        self.compiled = on

    def compile_shape(self, batch: dict) -> None:
        """Forward, loss and backward of one batch, gradients dropped: compiles (or loads from
        the compile cache) this batch's shape without changing the weights or the optimizer."""
        sync = self.model.no_sync() if hasattr(self.model, "no_sync") else contextlib.nullcontext()
        with sync:
            self.loss_fn(batch)["loss"].backward()
        self.opt.zero_grad(set_to_none=True)

    def _mark(self, phase: str) -> None:
        for h in self.hooks:
            h.phase(phase)

    def __call__(self, micro_batches: list[dict]) -> None:
        """One optimizer step over ``grad_accum`` micro-batches."""
        n = len(micro_batches)
        total = None
        for i, batch in enumerate(micro_batches):
            # DDP all-reduces gradients on the last micro-batch only.
            sync = contextlib.nullcontext() if i == n - 1 or not hasattr(self.model, "no_sync") \
                else self.model.no_sync()
            with sync:
                self._mark("forward")
                losses = self.loss_fn(batch)
                self._mark("backward")
                loss = losses["loss"] / n
                (self.scaler.scale(loss) if self.scaler else loss).backward()
            self.add(losses)
            total = loss.detach() if total is None else total + loss.detach()

        if self.scaler:
            self.scaler.unscale_(self.opt)
        max_norm = self.cfg.grad_clip if self.cfg.grad_clip > 0 else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm, foreach=True)
        bad = ~(torch.isfinite(norm) & torch.isfinite(total))  # 0-dim bool, stays on the device
        self.step_done(bad, {"grad_norm": torch.where(bad, 0.0, norm)})
        self._mark("optimizer")
        if self.scaler:
            self.scaler.step(self.opt)  # skips by itself on inf/nan gradients
            self.scaler.update()
        else:
            self.opt.found_inf = bad.float()
            self.opt.step()
        self.sched.step()
        self.opt.zero_grad(set_to_none=True)

    @property
    def lr(self) -> float:
        return self.sched.get_last_lr()[0]

    @staticmethod
    def frames_of(batch) -> int:
        return batch.frames

    def state_dict(self) -> dict:
        return {**self.counters_state(), "scaler": self.scaler.state_dict() if self.scaler else {}}

    def load_state_dict(self, state: dict) -> None:
        self.load_counters(state)
        if self.scaler and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
