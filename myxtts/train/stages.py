"""The training stages, each one :class:`StageSpec`: everything that differs between training
the acoustic model and training the vocoder, in one table (``STAGES``), so that the builder
(train/build.py), the trainer and the loop ask the stage's spec instead of comparing its name.

A spec holds the stage's constants (which setting its learning rate comes from, whether it sizes
its batches, compiles, runs under DDP, whose text its weights read) and its builders: the parts
of a run (cache, model, step with its optimizer and schedule, sampler and batches), what runs
before its plan resolves, the run header, what runs after each step, the voices a checkpoint
names and the out-of-memory message. The acoustic stage's builders are in train/acoustic.py, the
vocoder's in train/vocoder.py; both share the loop, the checkpoints and the trainer's flow.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from myxtts.config import Config
from myxtts.train import acoustic, vocoder
from myxtts.train.distributed import DistInfo
from myxtts.train.plan import Plan
from myxtts.train.precision import Precision

if TYPE_CHECKING:
    from myxtts.errors import UserError
    from myxtts.train.build import Run


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


def _nothing(*_args) -> None:
    return None


STAGES: dict[str, StageSpec] = {s.name: s for s in (
    StageSpec(name="acoustic", lr_setting="train.lr", sizes_batches=True, may_compile=True,
              may_distribute=True, weights_section="model", reads_text=True, optimizer_in_step=False,
              prepare=acoustic.speaker_embeddings, build=acoustic.build, header=acoustic.header,
              after_step=acoustic.after_step, voices=acoustic.voices,
              out_of_memory=acoustic.out_of_memory),
    StageSpec(name="vocoder", lr_setting="vocoder.lr", sizes_batches=False, may_compile=False,
              may_distribute=False, weights_section="vocoder", reads_text=False, optimizer_in_step=True,
              prepare=_nothing, build=vocoder.build, header=vocoder.header,
              after_step=_nothing, voices=_nothing, out_of_memory=vocoder.out_of_memory),
)}


def stage_spec(name: str) -> StageSpec:
    """The spec of the stage called ``name``."""
    if name not in STAGES:
        raise ValueError(f"stage must be one of {tuple(STAGES)}, got {name!r}")
    return STAGES[name]
