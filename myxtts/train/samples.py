"""Periodic samples during training: one fixed sentence, spoken in a held-out voice, written as
a wav (through the run's own vocoder once ``RUN/vocoder`` holds one, else Griffin-Lim: a quick
listen, not vocoder quality), a mel image and an alignment image."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from myxtts import audio, vocode
from myxtts.config import Config
from myxtts.errors import UserError
from myxtts.text import TextProcessor

SENTENCE = "The quick brown fox jumps over the lazy dog."


def _reference(cache, n_frames: int) -> np.ndarray:
    """A held-out utterance's mel (a training one if nothing is held out), (T, n_mels)."""
    pool = cache.indices("val")
    i = int(pool[0]) if pool.size else 0
    return np.asarray(cache.mel(i)[:n_frames], dtype=np.float32)


def write_sample(out: Path, core, cache, cfg: Config, run: Path | None = None, sentence: str = SENTENCE) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    tp = TextProcessor(cache.text_cfg, cache.vocab)
    try:
        ids = tp.encode(sentence)
    except UserError:  # the corpus lacks some letter of the sentence: use a held-out text
        pool = cache.indices("val")
        ids = tp.encode(cache.texts[int(pool[0]) if pool.size else 0])
    dev = next(core.parameters()).device
    ref = _reference(cache, int(cfg.data.ref_seconds * cfg.audio.sample_rate / cfg.audio.hop_length))
    tokens = torch.tensor([ids], device=dev)
    gen = torch.Generator(device=dev).manual_seed(0)
    mels, lens, attn = core.generate(tokens, torch.tensor([len(ids)], device=dev),
                                     torch.from_numpy(ref)[None].to(dev),
                                     torch.tensor([ref.shape[0]], device=dev), generator=gen)
    mel = mels[0, : int(lens[0])].float().cpu()  # (T, n_mels)
    to_wave = vocode.load(cfg.audio, checkpoint=run, device=dev)  # Griffin-Lim without a run
    wav = to_wave(mel)
    (out / "vocoder.txt").write_text(to_wave.name + "\n")
    paths = {"wav": out / "sample.wav"}
    audio.save_wav(paths["wav"], wav, cfg.audio.sample_rate)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return paths
    for name, img, xlabel, ylabel in (("mel", mel.T.numpy(), "frame", "mel bin"),
                                      ("attention", attn[0].float().cpu().numpy().T, "decoder step",
                                       "text position")):
        fig, ax = plt.subplots(figsize=(8, 3))
        ax.imshow(img, aspect="auto", origin="lower", interpolation="none")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{name}: {sentence[:60]}")
        fig.tight_layout()
        paths[name] = out / f"{name}.png"
        fig.savefig(paths[name], dpi=80)
        plt.close(fig)
    return paths
