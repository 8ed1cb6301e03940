"""Periodic samples during training: one fixed sentence, spoken in a held-out voice, written as
a wav (through the run's own vocoder once ``RUN/vocoder`` holds one, else Griffin-Lim: a quick
listen, not vocoder quality), a mel image and an alignment image. Spoken as ``synthesize`` and
``eval`` speak (:meth:`myxtts.infer.Synthesizer.synthesize`)."""
from __future__ import annotations

from pathlib import Path

from myxtts import audio, vocode
from myxtts.config import Config
from myxtts.errors import UserError
from myxtts.files import atomic_write, write_text
from myxtts.infer import Synthesizer
from myxtts.rundir import RunDir
from myxtts.speak import reference_from_cache
from myxtts.text import TextProcessor

SENTENCE = "The quick brown fox jumps over the lazy dog."


def write_sample(out: Path, core, cache, cfg: Config, run: Path | None = None, sentence: str = SENTENCE) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    tp = TextProcessor(cache.text_cfg, cache.vocab)
    pool = cache.indices("val")
    held_out = int(pool[0]) if pool.size else 0  # a training utterance if nothing is held out
    try:
        tp.encode(sentence)
    except UserError:  # the corpus lacks some letter of the sentence: use a held-out text
        sentence = cache.index.text[held_out]
    to_wave = vocode.load(cfg.audio, checkpoint=run, device=next(core.parameters()).device)
    synth = Synthesizer.of(core, cfg, tp, to_wave, log=lambda _: None)
    (spoken,) = synth.synthesize([sentence], reference_from_cache(cache, held_out, cfg))
    mel, wav = spoken.mel, spoken.wav
    write_text(out / RunDir.SAMPLE_VOCODER, to_wave.name + "\n")
    paths = {"wav": out / RunDir.SAMPLE_WAV}
    audio.save_wav(paths["wav"], wav, cfg.audio.sample_rate)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return paths
    for name, file, img, xlabel, ylabel in (("mel", RunDir.SAMPLE_MEL, mel.T.numpy(), "frame", "mel bin"),
                                            ("attention", RunDir.SAMPLE_ATTENTION, spoken.attn.T,
                                             "decoder step", "text position")):
        fig, ax = plt.subplots(figsize=(8, 3))
        ax.imshow(img, aspect="auto", origin="lower", interpolation="none")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{name}: {sentence[:60]}")
        fig.tight_layout()
        paths[name] = out / file
        with atomic_write(paths[name]) as tmp:
            fig.savefig(tmp, dpi=80, format="png")
        plt.close(fig)
    return paths
