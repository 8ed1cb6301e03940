"""Training checkpoints: everything needed to continue a run exactly where it stopped.

    RUN/checkpoints/step-00001000/
        model.safetensors   weights + config + vocabulary (models.checkpoint format)
        state.pt            one entry per run component (loop position, step counters and scaler,
                            optimizer, schedule, batch position) plus every rank's RNG state
        resume.json         what the run's settings resolved to (train/plan.py): a resume reads it
    RUN/best/model.safetensors      the weights with the lowest validation loss so far

A checkpoint is written whole under a temporary name and renamed into place
(:func:`myxtts.files.atomic_folder`), so a run killed while saving leaves the previous checkpoint
intact. ``state.pt`` holds only tensors and plain
containers and is loaded with ``weights_only=True``: no arbitrary unpickling.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import torch

from myxtts.errors import UserError
from myxtts.files import atomic_folder, atomic_write
from myxtts.models.checkpoint import describe, load_weights, read_metadata, save_model
from myxtts.rundir import RunDir
from myxtts.train.stages import stage_spec


def checkpoint_dirs(run: Path) -> list[Path]:
    """The run's complete checkpoints (those with a training state), oldest first."""
    r = RunDir(run)
    return [d for d in map(r.step_dir, r.kept_steps()) if (d / RunDir.STATE).is_file()]


def latest(run: Path) -> Path | None:
    dirs = checkpoint_dirs(run)
    return dirs[-1] if dirs else None


def resume_point(run: Path, kind: str) -> Path | None:
    """The newest checkpoint of ``run``, after checking it belongs to this stage (before anything
    is written into the directory)."""
    last = latest(run)
    if last is not None:
        have = read_metadata(last / RunDir.MODEL)["kind"]
        if have != kind:
            raise UserError(f"{run} holds an {have} run; give the {kind} stage its own --out")
    return last


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save(run: Path, step: int, model, cfg, vocab_symbols, train_state: dict, keep_last: int,
         kind: str = "acoustic", plan=None, speakers: list[str] | None = None) -> Path:
    final = RunDir(run).step_dir(step)
    with atomic_folder(final) as tmp:
        save_model(tmp / RunDir.MODEL, model, cfg, vocab_symbols, kind=kind, step=step,
                   speakers=speakers)
        torch.save(train_state, tmp / RunDir.STATE)
        if plan is not None:
            plan.save(tmp, RunDir.RESUME)
    for old in checkpoint_dirs(run)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_state(path: Path, map_location="cpu") -> dict:
    try:
        return torch.load(path / RunDir.STATE, map_location=map_location, weights_only=True)
    except (OSError, RuntimeError, EOFError) as e:  # truncated, damaged or missing
        why = e.strerror if isinstance(e, OSError) else "damaged or truncated"
        raise UserError(f"{path / RunDir.STATE}: unreadable ({why}); move {path} aside to resume "
                        "from the checkpoint before it") from None


def save_best(run: Path, ckpt: Path) -> None:
    with atomic_write(RunDir(run).best) as tmp:
        shutil.copyfile(ckpt / RunDir.MODEL, tmp)


def gather_state(components: dict, rng: list[dict]) -> dict:
    """The ``state.pt`` content: each component's own state under its name, and the RNG."""
    return {"rng": rng, **{name: c.state_dict() for name, c in components.items()}}


def restore(path: Path, model, components: dict, cfg, rank: int = 0) -> None:
    """Load a checkpoint into a freshly built run. Strict: the checkpoint must hold exactly the
    components this run has, and its model settings must match the run's; a difference is a
    clear error naming it rather than a wrong resume."""
    meta = read_metadata(path / RunDir.MODEL)
    section = stage_spec(meta["kind"]).weights_section
    if meta.get("config"):
        saved = describe(path / RunDir.MODEL)[0].to_dict()  # as its format version meant it
        old = saved.get(section, {})
        now = cfg.to_dict()[section]
        diff = sorted(k for k in set(old) | set(now) if old.get(k) != now.get(k))
        if diff:
            raise UserError(f"{path}: the run was trained with other {section} settings than "
                            "asked for now: " + ", ".join(
                                f"{section}.{k}={old.get(k)!r} (now {now.get(k)!r})" for k in diff)
                            + "; resume with the saved settings or start a new --out")
        froze = saved.get("train", {}).get("freeze", "")
        if section == "model" and froze != cfg.train.freeze:  # the optimizer holds the others only
            raise UserError(f"{path}: the run was trained with train.freeze={froze!r} (now "
                            f"{cfg.train.freeze!r}); resume with the saved setting, or start a new "
                            "--out from this run's weights with --init-from")
    state = load_state(path)
    have, want = set(state) - {"rng"}, set(components)
    if have != want:
        parts = []
        if want - have:
            parts.append("missing " + ", ".join(sorted(want - have)))
        if have - want:
            parts.append("unknown " + ", ".join(sorted(have - want)))
        raise UserError(f"{path / RunDir.STATE}: does not fit this run ({'; '.join(parts)}); it was "
                        "written by another stage or version. Start a new --out")
    load_weights(model, path / RunDir.MODEL)
    for name, c in components.items():
        c.load_state_dict(state[name])
    set_rng_state(state["rng"][min(rank, len(state["rng"]) - 1)])
