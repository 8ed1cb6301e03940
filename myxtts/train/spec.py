"""What a training stage is and what it builds, as torchtitan's ``TrainSpec`` protocol: a
:class:`StageSpec` (one per stage, in train/stages.py's table) holds the stage's constants and its
builders; ``build_run`` (train/build.py) resolves a :class:`Setup` and has the stage build a
:class:`Run` from it. The stages' builders (train/acoustic.py, train/vocoder.py) import these
types from here, below everything that builds.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from myxtts.config import Config
from myxtts.data.cache import Cache
from myxtts.errors import UserError
from myxtts.train.batches import Batches
from myxtts.train.distributed import DistInfo
from myxtts.train.optim import Horizon
from myxtts.train.plan import Plan
from myxtts.train.precision import Precision
from myxtts.train.step import Step


@dataclass(frozen=True)
class Setup:
    """What ``build_run`` resolved before a stage builds its parts."""
    cfg: Config                 # the plan applied
    data: object                # the cache folder
    info: DistInfo
    device: torch.device
    precision: Precision
    plan: Plan
    backend: str | None         # torch.compile's backend (None: inductor)
    with_batches: bool          # build the endless device batches (measuring commands may not)


@dataclass(frozen=True)
class StageSpec:
    """One training stage: its constants, then its builders."""
    name: str
    lr_setting: str             # the setting its learning rate comes from: what a plan's lr resolves
    sizes_batches: bool         # data.frame_budget=auto measures its batches (else fixed segments)
    may_compile: bool           # train.compile applies (else its step runs eagerly, the plan says off)
    may_distribute: bool        # runs under torchrun, one process per GPU
    weights_section: str        # the settings its weights follow (fine-tuning takes them from SRC)
    reads_text: bool            # its weights read the cache's text: a new voice's must match them
    optimizer_in_step: bool     # its step saves the optimizer and schedule with its own state
    prepare: Callable[[Config, object, DistInfo], None]  # before the plan: what the data must hold
    # → the Run's parts: cache, model, step_fn, optimizer, scheduler, sampler, batches, horizon
    build: Callable[[Setup], dict]
    header: Callable[[Config, Run], list[str]]  # the run header, given the settings as asked
    after_step: Callable[..., Callable | None]  # (run, loop, log, evaluate, beside) → after_step(step, ending)
    voices: Callable[[Run], list | None]  # the voices a checkpoint names
    out_of_memory: Callable[[Config], UserError]  # what to change after running out of GPU memory


@dataclass
class Run:
    cfg: Config
    spec: StageSpec                # what the stage builds and runs (train/stages.py)
    info: DistInfo
    device: torch.device
    precision: Precision
    cache: Cache
    model: torch.nn.Module         # the bare module a checkpoint's weights belong to
    step_fn: Step                  # TrainStep | VocoderStep: one optimizer step, no host sync
    optimizer: torch.optim.Optimizer
    scheduler: object
    sampler: object                # the training split's BucketSampler (the run's shapes)
    batches: Batches | None        # endless device batches (None when not asked for)
    plan: Plan                     # what the settings resolved to (cfg holds the result)
    horizon: Horizon | None = None  # where the schedule ends under a time budget

    @property
    def stage(self) -> str:
        return self.spec.name

    @property
    def shapes(self) -> list[tuple[int, int, int]]:
        return self.sampler.shapes()

    @property
    def components(self) -> dict:
        """Everything a checkpoint restores besides the weights, by the name it is saved under.
        A stage whose step holds its optimizer and schedule saves them with the step's state."""
        parts = {"step_fn": self.step_fn}
        if not self.spec.optimizer_in_step:
            parts.update(optimizer=self.optimizer, scheduler=self.scheduler)
        if self.batches is not None:
            parts["batches"] = self.batches
        return parts

    def close(self) -> None:
        if self.batches is not None:
            self.batches.stream.close()
