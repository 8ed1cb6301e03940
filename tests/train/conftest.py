import os
import subprocess
import sys
from pathlib import Path

import pytest

from myxtts.config import load
from myxtts.data.prepare import prepare
from myxtts.rundir import RunDir

ROOT = Path(__file__).resolve().parents[2]
LJ = ROOT / "tests" / "fixtures" / "ljspeech"

# Small and fast on two CPU cores; deterministic so runs can be compared step by step.
FAST = ["model.d_model=64", "model.n_heads=2", "model.text_layers=1", "model.decoder_layers=1",
        "model.ref_channels=32", "model.prenet_dim=32", "model.postnet_channels=32",
        "model.postnet_layers=2", "model.n_latents=4", "data.frame_budget=1200",
        "data.pad_multiple=16", "data.max_buckets=2", "data.num_workers=0",
        "train.compile=off", "train.deterministic=true", "train.warmup_steps=2",
        "train.val_every=1000", "train.sample_every=1000", "train.log_every=1"]


@pytest.fixture(scope="session")
def lj_cache(tmp_path_factory):
    out = tmp_path_factory.mktemp("cache") / "lj"
    prepare(LJ, out, load(None, ["data.val_fraction=0.25"]), progress=False)  # 2 held out
    return out


def run_train(cache, out, *overrides, env=None, wait=True):
    cmd = [sys.executable, "-m", "myxtts", "train", "--config", "tiny", "--data", str(cache),
           "--out", str(out), "--no-progress", *FAST, *overrides]
    e = dict(os.environ, **(env or {}))
    if wait:
        return subprocess.run(cmd, capture_output=True, text=True, env=e, cwd=ROOT)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e,
                            cwd=ROOT)


def losses(run: Path) -> dict[int, float]:
    """Per-step training loss; a resumed run's later lines win for repeated steps."""
    out = {}
    for rec in RunDir(run).read_metrics():
        if rec.get("loss") is not None:
            out[rec["step"]] = rec["loss"]
    return out
