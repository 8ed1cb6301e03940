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

from myxtts.train import acoustic, vocoder
from myxtts.train.spec import StageSpec


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
