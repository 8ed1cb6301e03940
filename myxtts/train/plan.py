"""The plan: what a run resolved its settings to on this machine, kept apart from the settings.

``RUN/config.yaml`` holds the settings exactly as asked, ``auto`` included, so it still says what
the user wanted and can be run again on another machine. What they resolved to when the run
started (device, precision, compile mode, frame budget with its batch cap and learning rate,
world size) is one ``Plan``, written to ``RUN/plan.json`` and, as ``resume.json``, into every
checkpoint (older checkpoints hold it as ``plan.json``). A resume reads the plan of the
checkpoint it resumes from instead of resolving again: the same batch
shapes and the same rate, so the resumed run continues the one that stopped
(``train.build.resolve_plan``). A fine-tuning run's plan also says where its first weights came
from (``init_from``, train/finetune.py), so every checkpoint of it names its origin; a vocoder run
trained on an acoustic model's mels names that model (``mels_from``, train/vocoder.py), and a
resume reads that same model again.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from myxtts.config import Config
from myxtts.errors import UserError
from myxtts.files import write_json
from myxtts.rundir import RunDir
from myxtts.train.finetune import describe_origin

FILE = RunDir.PLAN  # RUN/plan.json: the run's plan
CHECKPOINT_FILE = RunDir.RESUME  # a checkpoint's copy: the plan a resume from it continues


def asked_lr(cfg: Config, setting: str = "train.lr") -> float:
    """The learning rate as asked, in the stage's own ``setting`` (``StageSpec.lr_setting``)."""
    section, name = setting.split(".")
    return getattr(getattr(cfg, section), name)


def asked_settings(cfg: Config, lr_setting: str = "train.lr") -> dict:
    """The settings a plan resolves, as the user gave them."""
    return {"precision": cfg.train.precision, "compile": cfg.train.compile,
            "frame_budget": cfg.data.frame_budget, "max_batch_size": cfg.data.max_batch_size,
            "lr": asked_lr(cfg, lr_setting)}


@dataclass(frozen=True)
class Plan:
    device: str            # "cuda:0", "cpu"
    device_name: str       # the GPU's name, or the CPU's model and cores
    precision: str         # fp32 | bf16 | fp16
    compile: str           # off | default | cudagraphs | regional
    frame_budget: int      # mel frames per batch
    max_batch_size: int    # rows per batch at most (grows with an ``auto`` budget)
    lr: float              # peak learning rate (scaled with an ``auto`` budget): the stage's lr_setting
    world_size: int
    notes: tuple[str, ...] = ()  # how each ``auto`` setting was resolved, for the run header
    init_from: dict | None = None  # {path, step, sha256} of the weights it started from; None: untrained
    speaker_embedding: str | None = None  # model.speaker_embedding resolved; None: as asked (older plans)
    mels_from: dict | None = None  # {path, step, sha256, kept} of the acoustic model a vocoder reads the mels of

    def apply(self, cfg: Config, lr_setting: str = "train.lr") -> Config:
        """``cfg`` with the resolved values in place of what was asked: what the run trains with
        (the learning rate in the stage's own setting, ``StageSpec.lr_setting``)."""
        data = dataclasses.replace(cfg.data, frame_budget=self.frame_budget,
                                   max_batch_size=self.max_batch_size)
        train = dataclasses.replace(cfg.train, precision=self.precision, compile=self.compile)
        cfg = dataclasses.replace(cfg, data=data, train=train)
        if self.speaker_embedding is not None:
            model = dataclasses.replace(cfg.model, speaker_embedding=self.speaker_embedding)
            cfg = dataclasses.replace(cfg, model=model)
        section, name = lr_setting.split(".")
        return dataclasses.replace(cfg, **{section: dataclasses.replace(getattr(cfg, section),
                                                                         **{name: self.lr})})

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "notes": list(self.notes)}

    def save(self, folder: str | Path, name: str = FILE) -> None:
        write_json(Path(folder) / name, self.to_dict())  # a run killed mid-write keeps the previous plan

    @classmethod
    def load(cls, folder: str | Path) -> Plan | None:
        """The plan saved in ``folder`` (a checkpoint, or a run); None if it holds none. Strict:
        an unknown field, or a missing one that has no default, is an error naming it. A field
        with a default was added later: a plan written before it lacks it and reads as the
        default."""
        found = [Path(folder) / n for n in (CHECKPOINT_FILE, FILE) if (Path(folder) / n).is_file()]
        if not found:
            return None
        path = found[0]
        try:
            d = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise UserError(f"{path}: unreadable ({e}); move the checkpoint aside to resume from "
                            "the one before it") from None
        fields = dataclasses.fields(cls)
        names = {f.name for f in fields}
        required = {f.name for f in fields if f.default is dataclasses.MISSING}
        missing, unknown = sorted(required - set(d)), sorted(set(d) - names)
        if missing or unknown:
            raise UserError(f"{path}: " + "; ".join(
                p for p in (missing and f"missing {', '.join(missing)}",
                            unknown and f"unknown {', '.join(unknown)}") if p)
                + "; it was written by another version: start a new --out")
        return cls(**{**d, "notes": tuple(d.get("notes", ()))})


def plan_lines(asked: Config, plan: Plan) -> dict:
    """The run header's settings: each as asked, and what it resolved to where that differs."""
    def both(a, b) -> str:
        return f"{a}" if a == b else f"{a} -> {b}"

    a = asked_settings(asked)
    lines = {"device": f"{plan.device} ({plan.device_name})",
             "precision": both(a["precision"], plan.precision),
             "compile": both(a["compile"], plan.compile),
             "frame budget": both(a["frame_budget"], plan.frame_budget),
             "lr": both(f"{a['lr']:.3g}", f"{plan.lr:.3g}"),
             "world size": plan.world_size}
    if plan.init_from:
        lines["init from"] = describe_origin(plan.init_from)
    return lines
