import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from myxtts import audio
from myxtts.config import load
from myxtts.data.prepare import prepare

ROOT = Path(__file__).resolve().parents[2]
LJ = ROOT / "tests" / "fixtures" / "ljspeech"
VOICES = ROOT / "tests" / "fixtures" / "reference_voices"
FA = ROOT / "data" / "demo-fa"  # espeak-ng's Persian voice
SR = 22050

# A model small enough to train a few steps in seconds; a low decoder cap keeps its babble short.
TINY = ["model.d_model=64", "model.n_heads=2", "model.text_layers=1", "model.decoder_layers=1",
        "model.ref_channels=32", "model.prenet_dim=32", "model.postnet_channels=32",
        "model.postnet_layers=2", "model.n_latents=4", "model.max_decoder_steps=30",
        "data.frame_budget=1200", "data.pad_multiple=16", "data.max_buckets=2", "data.num_workers=0",
        "train.compile=off", "train.deterministic=true", "train.warmup_steps=2", "train.log_every=1",
        "train.val_every=1000", "train.sample_every=1000"]


def lj_text(uid: str) -> str:
    rows = (line.split("|") for line in (LJ / "metadata.csv").read_text().splitlines())
    return {r[0]: r[2] for r in rows}[uid]


def lj_wav(uid: str) -> np.ndarray:
    return audio.load_audio(LJ / "wavs" / f"{uid}.wav", SR)


def fa_text(uid: str) -> str:
    """The Persian demo's text of ``uid`` as it was spoken (numbers in words)."""
    rows = (line.split("|") for line in (FA / "metadata.csv").read_text(encoding="utf-8").splitlines())
    return {r[0]: r[2] for r in rows}[uid]


def multilingual_missing() -> str | None:
    """Why the multilingual recogniser cannot load (a part of the eval extra absent), or None."""
    from myxtts.evaluate.asr import MULTILINGUAL_PARTS

    absent = [dist for mod, dist in MULTILINGUAL_PARTS.items() if importlib.util.find_spec(mod) is None]
    return f"the eval extra's multilingual Whisper is not installed ({', '.join(absent)})" if absent else None


@pytest.fixture(scope="session")
def listener():
    from myxtts.evaluate.evaluation import Listener

    return Listener(threads=2)


@pytest.fixture(scope="session")
def short_val_cache(tmp_path_factory):
    """The LJSpeech fixture with its two shortest clips held out (fast to synthesize and score)."""
    corpus = tmp_path_factory.mktemp("corpus") / "lj"
    shutil.copytree(LJ, corpus)
    (corpus / "val.txt").write_text("LJ001-0002\nLJ001-0008\n")
    out = corpus.parent / "cache"
    prepare(corpus, out, load("tiny"), progress=False)
    return out


def train_tiny(cache, out, *overrides):
    r = subprocess.run([sys.executable, "-m", "myxtts", "train", "--config", "tiny", "--data",
                        str(cache), "--out", str(out), "--no-progress", *TINY, *overrides],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r.stderr


@pytest.fixture(scope="session")
def tiny_run(short_val_cache, tmp_path_factory):
    """A tiny model trained 3 steps, evaluating itself at step 2 (train.eval_every)."""
    out = tmp_path_factory.mktemp("run") / "run"
    return out, train_tiny(short_val_cache, out, "train.max_steps=3", "train.eval_every=2")
