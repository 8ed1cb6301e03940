"""One served model for every test here: an untrained tiny model (the duration decoder on
phonemes, as the presets train) with an untrained vocoder of the real architecture, prepared
and saved the way a run is, started with ``myxtts serve`` in a process of its own, as a user
starts it. Untrained weights say nothing intelligible, but every path a request takes (batching,
pieces, resampling, timings, formats) is the trained model's, at a fraction of the set-up."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import torch

from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.prepare import prepare
from myxtts.models.checkpoint import save_model
from myxtts.models.vocoder import build_generator
from myxtts.models.xtts import XTTS

ROOT = Path(__file__).resolve().parents[2]
LJ = ROOT / "tests" / "fixtures" / "ljspeech"
VOICES = ROOT / "tests" / "fixtures" / "reference_voices"
API_KEY = "test-key"
SAMPLE_RATE = 22050


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Served:
    url: str
    wyoming: str  # tcp://HOST:PORT
    wyoming_port: int
    log: Path
    run: Path
    proc: subprocess.Popen
    voices: Path  # its --voices folder

    def headers(self) -> dict:
        return {"Authorization": f"Bearer {API_KEY}"}

    def health(self) -> dict:
        return httpx.get(f"{self.url}/health", timeout=10).json()

    def log_text(self) -> str:
        return self.log.read_text()


def make_run(root: Path) -> tuple[Path, Path, Path]:
    """→ (run, cache, voices folder)."""
    cfg = load("tiny")
    prepare(LJ, root / "cache", cfg, progress=False)
    cache = Cache(root / "cache")
    torch.manual_seed(0)
    run = root / "run"
    save_model(run / "checkpoints" / "step-00000001" / "model.safetensors",
               XTTS(cfg.model, len(cache.vocab), cfg.audio.n_mels), cfg, cache.vocab.symbols, step=1)
    save_model(run / "vocoder" / "model.safetensors", build_generator(cfg), cfg, cache.vocab.symbols, kind="vocoder")
    voices = root / "voices"
    (voices / "arctic-male").mkdir(parents=True)
    shutil.copy(VOICES / "arctic_a0007_male.wav", voices / "arctic-male" / "clip1.wav")
    shutil.copy(VOICES / "arctic_a0009_slt_female.wav", voices / "arctic-male" / "clip2.wav")
    outside = root / "outside"  # a voice folder that is a link out of the voices folder: never read
    outside.mkdir()
    shutil.copy(VOICES / "arctic_a0009_slt_female.wav", outside / "clip.wav")
    (voices / "escapee").symlink_to(outside, target_is_directory=True)
    return run, root / "cache", voices


def start(root: Path, run: Path, cache: Path, voices: Path, log: Path, *extra: str) -> Served:
    """``myxtts serve`` on the run, in a process of its own, once it answers."""
    port, wport = free_port(), free_port()
    cmd = [sys.executable, "-m", "myxtts", "serve", "--checkpoint", str(run), "--data", str(cache),
           "--voices", str(voices), "--port", str(port), "--wyoming", f"tcp://127.0.0.1:{wport}", *extra]
    env = dict(os.environ, MYXTTS_API_KEY=API_KEY, OMP_NUM_THREADS="1")
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    s = Served(f"http://127.0.0.1:{port}", f"tcp://127.0.0.1:{wport}", wport, log, run, proc, voices)
    deadline = time.time() + 120
    while True:
        assert proc.poll() is None, log.read_text()
        try:
            if s.health()["status"] == "ok":
                break
        except httpx.HTTPError:
            pass
        assert time.time() < deadline, log.read_text()
        time.sleep(0.2)
    return s


def stop(s: Served) -> None:
    s.proc.send_signal(signal.SIGTERM)  # how a service manager stops it (Ctrl-C: the every-command test)
    assert s.proc.wait(timeout=30) == 0, s.log_text()
    text = s.log_text()
    assert "Traceback" not in text and text.rstrip().endswith("myxtts serve: stopped"), text


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    run, cache, voices = make_run(root)
    # --max-requests 9: the load test's 8 clients fit; the busy test fills it
    s = start(root, run, cache, voices, root / "serve.log", "--max-requests", "9")
    yield s
    stop(s)
