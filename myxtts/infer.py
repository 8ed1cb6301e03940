"""Text (+ reference wav) → wav: batched, KV-cached synthesis (``myxtts synthesize``).

Each text is split into sentences (see :mod:`myxtts.text.sentences`); all sentences are
synthesised together (sorted by length, in batches), each stopping on its own stop token, and
each text's sentences are joined with a short pause. Every result says whether it is silent and
whether a sentence ran into ``model.max_decoder_steps`` instead of stopping; both are warned
about. Speaking itself, and the rule for the reference clip (any format; cut to the
``data.ref_seconds`` training used; none: the neutral voice), is :mod:`myxtts.speak`'s.

Mels become audio through the run's own vocoder (``RUN/vocoder``), the one ``--vocoder`` names,
or Griffin-Lim where there is none (it needs no training but sounds noticeably worse); the
command says which (:mod:`myxtts.vocode`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from myxtts import audio, speak, vocode
from myxtts.errors import UserError
from myxtts.models.checkpoint import load_model
from myxtts.rundir import choose_weights
from myxtts.speak import SILENT_DBFS, dbfs
from myxtts.text import echo

PAUSE_SECONDS = 0.25  # silence between the sentences of one text (rounded to whole hops)
# Sentence length limit: the decoder cap in seconds times a slow reading rate (read speech in
# LJSpeech and the demo corpus runs at about 15-18 characters per second).
CHARS_PER_SECOND = 10


@dataclass
class Synthesis:
    """One text's audio, and what a listener should know about it before playing it."""

    text: str
    wav: np.ndarray  # (S,) float32 in [-1, 1]
    sample_rate: int
    parts: int  # sentences (or pieces of overlong ones) spoken separately, joined with pauses
    cut: int  # of those, parts that ran into model.max_decoder_steps instead of stopping
    path: Path | None = None  # where it was written, if it was

    @property
    def seconds(self) -> float:
        return self.wav.size / self.sample_rate

    @property
    def peak(self) -> float:
        return float(np.abs(self.wav).max()) if self.wav.size else 0.0

    @property
    def rms(self) -> float:
        return float(np.sqrt(np.mean(self.wav.astype(np.float64) ** 2))) if self.wav.size else 0.0

    @property
    def silent(self) -> bool:
        return dbfs(self.peak) < SILENT_DBFS

    @property
    def stopped(self) -> bool:
        """Every sentence ended on its own stop token."""
        return self.cut == 0

    def warnings(self, cap: int) -> list[str]:
        out = []
        if self.silent:
            out.append(f"warning: the audio for {echo(self.text)} is silent (peak "
                       f"{dbfs(self.peak):.0f} dBFS): the model's mel holds no sound")
        if self.cut:
            which = "it" if self.parts == 1 else f"{self.cut} of its {self.parts} parts"
            out.append(f"warning: {echo(self.text)} did not stop on its own: {which} ran into "
                       f"model.max_decoder_steps={cap} and the audio is cut there")
        return out


def _device(name: str | None) -> torch.device:
    if name in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"--device {name}: not a device; use auto, cpu, cuda or cuda:N") from None
    if device.type not in ("cpu", "cuda"):
        raise UserError(f"--device {name}: MyXTTS runs on cpu or cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--device {name}: no CUDA device is available")
    return device


class Synthesizer:
    """A run loaded once to speak: the model, its settings, its text front end and its
    mel-to-audio step. Every way MyXTTS speaks goes through one (:meth:`speak`): ``synthesize``,
    ``eval``, the training samples and periodic evaluation (:meth:`of` a model in memory),
    ``serve`` and ``export``."""

    def __init__(self, checkpoint, vocoder=None, device: str | None = None, log=print,
                 step: int | None = None):
        """``checkpoint``: a run (its best weights, or those of ``step``: see
        :meth:`~myxtts.rundir.RunDir.choose_weights`, whose choice is logged), a checkpoint
        folder or a model file."""
        from myxtts.text import TextProcessor, Vocabulary  # the text front end of the checkpoint

        self.device, self.log = _device(device), log
        self.weights, self.why = weights, why = choose_weights(checkpoint, step)
        log(f"weights: {weights}: {why}")
        self.model, self.cfg, symbols, self.meta = load_model(weights, self.device)
        if self.meta["kind"] != "acoustic":
            raise UserError(f"{self.meta['path']} is a {self.meta['kind']} checkpoint; "
                            "--checkpoint needs an acoustic model")
        self.text = TextProcessor(self.cfg.text, Vocabulary(symbols))
        self.to_wave = vocode.load(self.cfg.audio, vocoder, checkpoint, self.device)

    @classmethod
    def of(cls, model, cfg, text, to_wave, log=print) -> Synthesizer:
        """A model already in memory (training's samples and periodic evaluation) to speak with."""
        self = cls.__new__(cls)
        self.model, self.cfg, self.text, self.to_wave, self.log = model, cfg, text, to_wave, log
        self.device, self.meta = next(model.parameters()).device, {"kind": "acoustic", "step": None, "path": None}
        return self

    def speak(self, texts: list[str], voice, *, seed: int = 0, speed: float = 1.0, batch_size: int = 1,
              normalized: bool = False, vocode: bool = True, encoded=None, say=None) -> list[speak.Spoken]:
        """Each of ``texts`` in ``voice`` (a :class:`~myxtts.speak.Reference`, or one per text):
        :func:`myxtts.speak.speak` with this run's model, settings, text front end and, unless
        ``vocode`` is False (the server vocodes in pieces as it streams), its mel-to-audio step."""
        return speak.speak(self.model, self.cfg, self.text, texts, voice, self.to_wave if vocode else None,
                           seed, batch_size, normalized, say or self.log, speed, encoded)

    @property
    def sample_rate(self) -> int:
        return self.cfg.audio.sample_rate

    # ------------------------------------------------------------------------ inputs
    def sentences(self, text: str) -> list[str]:
        """One text → the normalised sentences it is spoken as."""
        from myxtts.text.sentences import split_sentences

        a, m = self.cfg.audio, self.cfg.model
        cap_seconds = m.max_decoder_steps * m.reduction * a.hop_length / a.sample_rate
        norm = self.text.normalize(text)
        return split_sentences(norm, int(cap_seconds * CHARS_PER_SECOND)) or [norm]  # empty:
        # the encoder's clear error

    def reference(self, voice=None) -> speak.Reference:
        """A sound file → the voice to speak in (:func:`myxtts.speak.reference_from_file`); a
        folder of clips → its voice by the one folder rule (:func:`myxtts.voice.from_folder`); a
        :class:`~myxtts.speak.Reference` as it is; None → the neutral voice."""
        if voice is None:
            return speak.neutral(self.cfg)
        if isinstance(voice, speak.Reference):
            return voice
        if Path(voice).is_dir():
            from myxtts.voice import from_folder

            found = from_folder(Path(voice).name, Path(voice), self.cfg, self.log, source=str(voice))
            if found is None:
                raise UserError(f"reference {voice}: the folder holds no usable clip")
            return found.reference
        return speak.reference_from_file(voice, self.cfg, self.log)

    # ------------------------------------------------------------------------ synthesis
    def synthesize(self, texts: list[str], reference=None, seed: int = 0,
                   batch_size: int = 16) -> list[Synthesis]:
        """texts → one :class:`Synthesis` each; silent or cut results are warned about."""
        self.log(vocode.GRIFFIN_LIM_NOTE if self.to_wave.griffin_lim else f"vocoder: {self.to_wave.name}")
        parts = [(i, s) for i, t in enumerate(texts) for s in self.sentences(t)]
        spoken = self.speak([s for _, s in parts], self.reference(reference), seed=seed,
                            batch_size=batch_size, normalized=True)
        hop = self.cfg.audio.hop_length  # whole hops keep every wav a whole number of frames
        pause = np.zeros(round(PAUSE_SECONDS * self.sample_rate / hop) * hop, dtype=np.float32)
        results = []
        for i, text in enumerate(texts):
            mine = [k for k, (owner, _) in enumerate(parts) if owner == i]
            pieces = [x for k in mine for x in (pause, spoken[k].wav)][1:]  # pause between sentences
            res = Synthesis(text, np.concatenate(pieces).astype(np.float32), self.sample_rate,
                            parts=len(mine), cut=sum(not spoken[k].stopped for k in mine))
            for warning in res.warnings(self.cfg.model.max_decoder_steps):
                self.log(warning)
            results.append(res)
        return results

    def synthesize_to_file(self, texts: list[str], out, reference=None, seed: int = 0,
                           batch_size: int = 16) -> list[Synthesis]:
        """Synthesise and write wavs: ``out`` is a .wav file for one text, else a directory
        (or a .wav stem, numbered). Returns the results, each with the path it was written to."""
        paths = output_paths(out, len(texts))
        for folder in {path.parent for path in paths}:  # before the work, not after it
            _check_writable(folder)
        results = self.synthesize(texts, reference, seed, batch_size)
        for path, res in zip(paths, results):
            audio.save_wav(path, res.wav, self.sample_rate)
            res.path = path
        return results


def _check_writable(folder: Path) -> None:
    """The folder exists and takes files, or its nearest existing parent can hold it."""
    there = folder
    while not there.exists() and there != there.parent:
        there = there.parent
    if not there.is_dir() or not os.access(there, os.W_OK | os.X_OK):
        why = "not a folder" if not there.is_dir() else "no permission to write"
        raise UserError(f"{folder}: cannot write the wav there ({there}: {why})")


def output_paths(out: str | None, n: int) -> list[Path]:
    """Where ``n`` outputs go: ``out`` itself for one .wav, numbered beside it or in a folder."""
    if out is None:
        return [Path("synthesized.wav")] if n == 1 else [Path("synthesized") / f"{i + 1:03d}.wav"
                                                         for i in range(n)]
    p = Path(out)
    if p.suffix.lower() == ".wav":
        return [p] if n == 1 else [p.with_name(f"{p.stem}_{i + 1:03d}.wav") for i in range(n)]
    return [p / f"{i + 1:03d}.wav" for i in range(n)]
