"""The one place a training run is assembled, for both stages and for every command that
measures training (``profile``, ``doctor``, ``tune``, ``bench``).

Order, fixed and applied from outside the model code: the plan (``resolve_plan``: device,
precision, compile mode, and batch sizing for ``data.frame_budget=auto``, train/sizing.py; first,
because measuring draws random numbers) → seed and determinism → cache → model(s) → DDP wrap →
step (compiled as the plan says) → optimizer and schedule → batches, the parts built by the
stage's :class:`~myxtts.train.spec.StageSpec`. What comes back is a :class:`Run`, whose
``components`` are everything a checkpoint must hold besides the weights; each component owns
its own state (``state_dict`` / ``load_state_dict``).
"""
from __future__ import annotations

import dataclasses
import os

import torch

from myxtts.config import Config
from myxtts.errors import UserError
from myxtts.speaker_encoder import resolve_setting
from myxtts.train import sizing as S
from myxtts.train.acoustic import host_copies
from myxtts.train.compile import check_padding, resolve_compile, use_cache
from myxtts.train.distributed import DistInfo
from myxtts.train.plan import Plan, asked_lr
from myxtts.train.precision import device_name, pick_device, resolve
from myxtts.train.spec import Run, Setup
from myxtts.train.stages import stage_spec


def seed_everything(cfg: Config, rank: int = 0) -> None:
    """The run's seed (per rank, so ranks draw different dropout) and determinism settings."""
    torch.manual_seed(cfg.train.seed + rank)
    if cfg.train.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False


def build_run(cfg: Config, data, *, stage: str = "acoustic", info: DistInfo | None = None,
              plan: Plan | None = None, compile: str | None = None, precision: str | None = None,
              backend: str | None = None, with_batches: bool = True) -> Run:
    """Assemble a run on this process's device, as ``plan`` says (resolved from ``cfg`` here
    when not given). ``compile`` and ``precision`` override ``train.compile`` /
    ``train.precision`` and ``backend`` torch.compile's backend (the measuring commands compare
    modes)."""
    spec = stage_spec(stage)
    info = info or DistInfo()
    tcfg = dataclasses.replace(cfg.train, **{k: v for k, v in (("compile", compile),
                                                               ("precision", precision)) if v})
    cfg = dataclasses.replace(cfg, train=tcfg)
    plan = plan or resolve_plan(cfg, data, stage=stage, info=info)
    cfg, device = plan.apply(cfg, spec.lr_setting), torch.device(plan.device)
    check_padding(cfg.data.pad_multiple, device, plan.compile)
    if not spec.may_distribute and (info.enabled or int(os.environ.get("WORLD_SIZE", "1")) > 1):
        raise UserError(f"the {spec.name} stage runs on one process; start it without torchrun")
    seed_everything(cfg, info.rank)
    prec = resolve(plan.precision, device)
    if plan.compile != "off":
        use_cache(cfg.train.compile_cache)
    parts = spec.build(Setup(cfg=cfg, data=data, info=info, device=device, precision=prec, plan=plan,
                             backend=backend, with_batches=with_batches))
    return Run(cfg=cfg, spec=spec, info=info, device=device, precision=prec, plan=plan, **parts)


def resolve_plan(cfg: Config, data, *, stage: str = "acoustic", info: DistInfo | None = None,
                 saved: Plan | None = None, init_from: dict | None = None,
                 mels_from: dict | None = None) -> Plan:
    """What ``cfg`` resolves to on this process's device. A resume passes the plan it ``saved``:
    its batches and learning rate are kept as they were, and so are its precision and compile
    mode unless the run moved to another kind of device (then they resolve again, and a note
    says so); so is the origin of its first weights. A new fine-tuning run passes that origin
    as ``init_from`` (train/finetune.py), a new vocoder run the acoustic model whose mels it
    reads as ``mels_from`` (train/vocoder.py)."""
    spec, info = stage_spec(stage), info or DistInfo()
    device = pick_device(info.local_rank)
    notes: list[str] = []
    # model.speaker_embedding=auto: resolved once, before anything builds a model, and kept
    embedding = (saved.speaker_embedding if saved is not None else None) or resolve_setting(cfg.model.speaker_embedding)
    if cfg.model.speaker_embedding == "auto" and saved is None:
        notes.append(f"model.speaker_embedding auto: {embedding} (the GE2E encoder's weights are "
                     f"{'installed' if embedding == 'ge2e' else 'not installed: pip install resemblyzer'})")
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, speaker_embedding=embedding))
    if saved is not None:
        budget, max_batch, lr = saved.frame_budget, saved.max_batch_size, saved.lr
        notes.append(f"batches and learning rate as planned when this run started (data.frame_budget "
                     f"{budget}, {spec.lr_setting} {lr:.3g})")
    else:
        sized = cfg
        if spec.sizes_batches:  # else its batches are segments of a fixed size (the vocoder's)
            sized, note = S.size_batches(cfg, data, device, info, sizing_probe(data, info, device))
            notes += [note] if note else []
        budget, max_batch, lr = sized.data.fixed_budget, sized.data.max_batch_size, asked_lr(sized, spec.lr_setting)
    same_device = saved is not None and torch.device(saved.device).type == device.type
    if same_device:
        precision, mode = saved.precision, saved.compile
    else:
        if saved is not None:
            notes.append(f"planned on {saved.device}, resumed on {device}: precision and compile "
                         "resolved again")
        precision = resolve(cfg.train.precision, device).name
        # A stage that never compiles steps eagerly whatever train.compile says; its plan says so.
        mode, note = resolve_compile(cfg.train.compile, device, info.enabled, host_copies(cfg)) \
            if spec.may_compile else ("off", "")
        notes += [note] if note else []
    return Plan(device=str(device), device_name=device_name(device), precision=precision,
                compile=mode, frame_budget=budget, max_batch_size=max_batch, lr=lr,
                world_size=info.world_size, notes=tuple(notes),
                init_from=saved.init_from if saved is not None else init_from, speaker_embedding=embedding,
                mels_from=saved.mels_from if saved is not None else mels_from)


def sizing_probe(data, info: DistInfo, device: torch.device):
    """How ``data.frame_budget=auto`` measures a candidate budget on this GPU: with a run this
    module builds once per candidate (eager, no batches), handed to the sizing as a builder."""
    return S.gpu_probe(lambda cfg: build_run(cfg, data, info=DistInfo(info.rank, 1, info.local_rank),
                                             compile="off", with_batches=False), device)
