"""Shared helpers for the model tests: the tiny preset, random batches, real LJSpeech batches."""
from __future__ import annotations

import csv
import math
from collections import Counter
from pathlib import Path

import pytest
import torch

from myxtts import audio
from myxtts.config import Config, load
from myxtts.models.xtts import XTTS
from myxtts.text import TextProcessor, Vocabulary

LJ = Path(__file__).resolve().parents[1] / "fixtures" / "ljspeech"
SILENCE = math.log(audio.LOG_FLOOR)


def tiny(*overrides: str) -> Config:
    """The tiny preset with the autoregressive decoder unless ``overrides`` name another: most
    model tests read its stop head and attention; the default duration decoder has its own
    (test_duration_decoder, test_aligner, test_monotonic, test_compile)."""
    return load("tiny", ["model.decoder=autoregressive", *overrides])


def still_model(*overrides: str):
    """The tiny XTTS, seeded, in eval mode and with no dropout anywhere, so that two passes are
    comparable. → (model, config); ``overrides`` come after the dropout settings."""
    cfg = tiny("model.prenet_dropout=0", "model.dropout=0", "model.ref_dropout=0", *overrides)
    torch.manual_seed(0)
    return XTTS(cfg.model, 40, 80).eval(), cfg


def random_batch(n_vocab=40, n_mels=80, token_lens=(23, 17, 9), mel_lens=(64, 50, 31),
                 ref_lens=(48, 30, 12), tt=None, tm=None, tr=None, seed=0) -> dict:
    """A batch in the loader's layout; padding filled like the loader does (0 / log floor)."""
    g = torch.Generator().manual_seed(seed)
    b = len(token_lens)
    tt, tm, tr = tt or max(token_lens), tm or max(mel_lens), tr or max(ref_lens)
    tokens = torch.zeros(b, tt, dtype=torch.long)
    mel = torch.full((b, tm, n_mels), SILENCE)
    ref = torch.full((b, tr, n_mels), SILENCE)
    for i in range(b):
        tokens[i, :token_lens[i]] = torch.randint(2, n_vocab, (token_lens[i],), generator=g)
        tokens[i, token_lens[i] - 1] = 1  # end of sentence
        mel[i, :mel_lens[i]] = torch.randn(mel_lens[i], n_mels, generator=g) * 2 - 5
        ref[i, :ref_lens[i]] = torch.randn(ref_lens[i], n_mels, generator=g) * 2 - 5
    return {"tokens": tokens, "token_lens": torch.tensor(token_lens), "mel": mel,
            "mel_lens": torch.tensor(mel_lens), "ref_mel": ref, "ref_lens": torch.tensor(ref_lens),
            "speaker": torch.zeros(b, dtype=torch.long)}


def lj_rows() -> list[tuple[str, str]]:
    with open(LJ / "metadata.csv", encoding="utf-8") as f:
        return [(r[0], r[2]) for r in csv.reader(f, delimiter="|", quoting=csv.QUOTE_NONE)]


def lj_batch(cfg: Config, ids: list[str], pad_multiple: int = 16):
    """Real clips → (batch, vocabulary). Reference of utterance i = utterance i-1 (same speaker,
    another utterance), cut to 200 frames, as the loader's reference clips are."""
    texts = dict(lj_rows())
    tp = TextProcessor(cfg.text)
    vocab = Vocabulary.build(Counter(s for i in ids for s in tp.symbols(texts[i])[0]))
    tp = TextProcessor(cfg.text, vocab)
    toks = [tp.encode(texts[i]) for i in ids]
    mels = [torch.from_numpy(audio.mel_spectrogram(
        audio.preprocess(audio.load_audio(LJ / "wavs" / f"{i}.wav", cfg.audio.sample_rate),
                         cfg.audio), cfg.audio)) for i in ids]
    tm = -(-max(m.shape[0] for m in mels) // pad_multiple) * pad_multiple
    b = len(ids)
    tokens = torch.zeros(b, max(map(len, toks)), dtype=torch.long)
    mel = torch.full((b, tm, cfg.audio.n_mels), SILENCE)
    for i, (t, m) in enumerate(zip(toks, mels)):
        tokens[i, :len(t)] = torch.tensor(t)
        mel[i, :m.shape[0]] = m
    mel_lens = torch.tensor([m.shape[0] for m in mels])
    batch = {"tokens": tokens, "token_lens": torch.tensor([len(t) for t in toks]), "mel": mel,
             "mel_lens": mel_lens, "ref_mel": mel.roll(1, 0)[:, :200].clone(),
             "ref_lens": mel_lens.roll(1).clamp(max=200), "speaker": torch.zeros(b, dtype=torch.long)}
    return batch, vocab


def fit(model, batch: dict, steps: int, lr: float = 2e-3, warmup: int = 30) -> list[dict]:
    """Plain AdamW with linear warm-up and gradient clipping on one batch, ``steps`` times.
    → the losses of every step, as floats."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    history = []
    for _ in range(steps):
        losses = model.losses(batch, model(batch))
        opt.zero_grad(set_to_none=True)
        losses["loss"].backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        history.append({k: float(v.detach()) for k, v in losses.items()})
    return history


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    pass
