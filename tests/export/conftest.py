import shutil
from collections import Counter
from pathlib import Path

import pytest
import torch

from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.prepare import prepare
from myxtts.models.checkpoint import save_model
from myxtts.models.vocoder import build_generator
from myxtts.models.xtts import XTTS
from myxtts.text import TextProcessor, Vocabulary

ROOT = Path(__file__).resolve().parents[2]
LJ = ROOT / "tests" / "fixtures" / "ljspeech"
VOICES = ROOT / "tests" / "fixtures" / "reference_voices"


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    pass


@pytest.fixture(scope="session")
def voice_run(tmp_path_factory) -> tuple[Path, Path]:
    """(run, cache): the LJSpeech clips prepared with two held out, and a run of the tiny model on
    their vocabulary with a vocoder in RUN/vocoder, both untrained (seeded): what the export
    carries is checked against what PyTorch computes, which needs no training. Exporting a
    trained run and Piper speaking it is tests/commands/test_every_command.py's export row."""
    root = tmp_path_factory.mktemp("export")
    shutil.copytree(LJ, root / "lj")
    (root / "lj" / "val.txt").write_text("LJ001-0002\nLJ001-0008\n")
    cfg = load("tiny")
    prepare(root / "lj", root / "cache", cfg, progress=False)
    return save_run(root / "run", cfg, Cache(root / "cache").vocab), root / "cache"


def save_run(run: Path, cfg, vocab) -> Path:
    """An untrained (seeded) tiny model of ``vocab`` and its vocoder, saved as a run."""
    torch.manual_seed(0)
    model = XTTS(cfg.model, len(vocab), cfg.audio.n_mels)
    with torch.no_grad():  # durations of a few frames a token, so the speech has some length
        model.decoder.duration.out.bias.fill_(1.5)
    save_model(run / "checkpoints" / "step-00000003" / "model.safetensors", model, cfg, vocab.symbols, step=3)
    save_model(run / "vocoder" / "model.safetensors", build_generator(cfg), cfg, vocab.symbols, kind="vocoder")
    return run


# Persian as a Persian corpus reads: the vocabulary of a Persian model is these sentences' phonemes
PERSIAN = ["سلام، حال شما چطور است؟", "این صدای خروجی است.", "امروز هوا خیلی خوب است و ما به پارک می‌رویم.",
           "کتاب‌ها روی میز هستند."]


@pytest.fixture(scope="session")
def persian_run(tmp_path_factory) -> Path:
    """The same untrained tiny model reading Persian (``text.language=fa``), no cache."""
    cfg = load("tiny", ["text.language=fa"])
    tp = TextProcessor(cfg.text)
    vocab = Vocabulary.build(Counter(s for text in PERSIAN for s in tp.symbols(text)[0]))
    return save_run(tmp_path_factory.mktemp("persian") / "run", cfg, vocab)


@pytest.fixture(scope="session")
def clone_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("clone")
    shutil.copy(VOICES / "arctic_a0009_slt_female.wav", folder)
    return folder
