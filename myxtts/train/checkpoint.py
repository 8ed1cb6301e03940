"""Training checkpoints: everything needed to continue a run exactly where it stopped.

    RUN/checkpoints/step-00001000/
        model.safetensors   weights + config + vocabulary (models.checkpoint format)
        state.pt            optimizer, scheduler, scaler, sampler position, RNG states, step
    RUN/best/model.safetensors      the weights with the lowest validation loss so far

A checkpoint is written into a temporary directory and renamed into place, so a run killed
while saving leaves the previous checkpoint intact. ``state.pt`` holds only tensors and plain
containers and is loaded with ``weights_only=True``: no arbitrary unpickling.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch

from myxtts.models.checkpoint import save_model

PREFIX = "step-"


def checkpoint_dirs(run: Path) -> list[Path]:
    root = run / "checkpoints"
    if not root.is_dir():
        return []
    done = [p for p in root.iterdir() if p.name.startswith(PREFIX) and (p / "state.pt").is_file()]
    return sorted(done, key=lambda p: int(p.name[len(PREFIX):]))


def latest(run: Path) -> Path | None:
    dirs = checkpoint_dirs(run)
    return dirs[-1] if dirs else None


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
         kind: str = "acoustic") -> Path:
    root = run / "checkpoints"
    final = root / f"{PREFIX}{step:08d}"
    tmp = root / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_model(tmp / "model.safetensors", model, cfg, vocab_symbols, kind=kind, step=step)
    torch.save(train_state, tmp / "state.pt")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    for old in checkpoint_dirs(run)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_state(path: Path, map_location="cpu") -> dict:
    return torch.load(path / "state.pt", map_location=map_location, weights_only=True)


def save_best(run: Path, ckpt: Path) -> None:
    best = run / "best"
    best.mkdir(parents=True, exist_ok=True)
    tmp = best / f".model.safetensors.tmp{os.getpid()}"
    shutil.copyfile(ckpt / "model.safetensors", tmp)
    os.replace(tmp, best / "model.safetensors")
