"""Text (+ reference wav) → wav: batched, KV-cached synthesis (``myxtts synthesize``).

Each text is split into sentences (see :mod:`myxtts.text.sentences`); all sentences are
synthesised together (sorted by length, in batches), each stopping on its own stop token, and
each text's sentences are joined with a short pause. Every result says whether it is silent and
whether a sentence ran into ``model.max_decoder_steps`` instead of stopping; both are warned
about. The reference clip may have any sample rate, channel count and soundfile format; it
is conditioned exactly like training audio (resample, trim, loudness) and must hold 0.5-10 s of
sound (longer clips are cut to their first 10 s). Without ``--reference`` the model's *neutral
voice* is used: the reference is fully masked out and the resampler's learned latents alone
condition the decoder (trained through ``model.ref_dropout``).

Mels become audio through the run's own vocoder (``RUN/vocoder``), the one ``--vocoder`` names,
or Griffin-Lim where there is none (it needs no training but sounds noticeably worse); the
command says which (:mod:`myxtts.vocode`).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from myxtts import audio, vocode
from myxtts.errors import UserError
from myxtts.models.checkpoint import load_model
from myxtts.text import echo

MIN_REF_SECONDS, MAX_REF_SECONDS = 0.5, 10.0
SILENT_DBFS = -60.0  # a reference or an output whose level stays below this is silence
PAUSE_SECONDS = 0.25  # silence between the sentences of one text (rounded to whole hops)
# Sentence length limit: the decoder cap in seconds times a slow reading rate (read speech in
# LJSpeech and the demo corpus runs at about 15-18 characters per second).
CHARS_PER_SECOND = 10


def dbfs(x: float) -> float:
    return 20 * math.log10(max(x, 1e-10))


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
    """Loads an acoustic checkpoint (and optionally a vocoder) once; synthesises many texts."""

    def __init__(self, checkpoint, vocoder=None, device: str | None = None, log=print):
        from myxtts.text import TextProcessor, Vocabulary  # the text front end of the checkpoint

        self.device, self.log = _device(device), log
        self.model, self.cfg, symbols, self.meta = load_model(checkpoint, self.device)
        if self.meta["kind"] != "acoustic":
            raise UserError(f"{self.meta['path']} is a {self.meta['kind']} checkpoint; "
                            "--checkpoint needs an acoustic model")
        self.text = TextProcessor(self.cfg.text, Vocabulary(symbols))
        self.to_wave = vocode.load(self.cfg.audio, vocoder, checkpoint, self.device)

    @property
    def sample_rate(self) -> int:
        return self.cfg.audio.sample_rate

    # ------------------------------------------------------------------------ inputs
    def sentences(self, text: str) -> list[str]:
        """One text → the normalised sentences it is spoken as."""
        from myxtts.text.sentences import split_sentences

        a, m = self.cfg.audio, self.cfg.model
        cap_seconds = m.max_decoder_steps * m.reduction * a.hop_length / a.sample_rate
        parts = split_sentences(self.text.normalize(text), int(cap_seconds * CHARS_PER_SECOND))
        return parts or [text]  # an empty text still gets encode's clear error

    def encode(self, texts: list[str]):
        """→ tokens (B, Tt) long, token_lens (B,). Characters the model was not trained on are
        read as their nearest known symbol (with a warning); unknown letters are an error."""
        ids = [self.text.encode(t, warn=self.log) for t in texts]
        tokens = torch.zeros(len(ids), max(map(len, ids)), dtype=torch.long)
        for i, seq in enumerate(ids):
            tokens[i, :len(seq)] = torch.tensor(seq)
        return tokens, torch.tensor([len(s) for s in ids])

    def reference(self, path=None):
        """A wav file → ref_mel (1, Tr, M), ref_lens (1,); None → neutral voice (length 0)."""
        a = self.cfg.audio
        if path is None:
            silence = torch.full((1, 1, a.n_mels), math.log(audio.LOG_FLOOR))
            return silence, torch.zeros(1, dtype=torch.long)
        try:
            wav = audio.load_audio(path, a.sample_rate)
        except audio.AudioError as e:
            raise UserError(f"reference {path}: {e}") from None
        wav = audio.preprocess(wav, a)
        rms = float(np.sqrt(np.mean(wav.astype(np.float64) ** 2))) if wav.size else 0.0
        if 20 * math.log10(max(rms, 1e-12)) < SILENT_DBFS:
            raise UserError(f"reference {path} is silent (RMS below {SILENT_DBFS:.0f} dBFS after "
                            "trimming); give 1-10 s of clear speech")
        seconds = wav.size / a.sample_rate
        if seconds < MIN_REF_SECONDS:
            raise UserError(f"reference {path} is too short ({seconds:.2f} s of sound after "
                            f"trimming); give 1-10 s of clear speech")
        if seconds > MAX_REF_SECONDS:
            self.log(f"note: reference is {seconds:.1f} s long; using its first "
                     f"{MAX_REF_SECONDS:.0f} s")
            n = int(MAX_REF_SECONDS * a.sample_rate) // a.hop_length * a.hop_length
            wav = wav[:n]
        mel = torch.from_numpy(audio.mel_spectrogram(wav, a))[None]  # (1, Tr, M)
        return mel, torch.tensor([mel.shape[1]])

    # ------------------------------------------------------------------------ synthesis
    def mels(self, texts: list[str], reference=None, seed: int = 0, batch_size: int = 16):
        """Each text as one utterance → (list of (T_i, M) log-mels on the CPU, list of whether
        each stopped on its own rather than at ``model.max_decoder_steps``), in ``texts`` order."""
        tokens, lens = self.encode(texts)
        ref_mel, ref_lens = self.reference(reference)
        gen = torch.Generator().manual_seed(seed)  # CPU generator: same output on any device
        order = sorted(range(len(texts)), key=lambda i: -int(lens[i]))  # similar lengths batch
        r, cap = self.cfg.model.reduction, self.cfg.model.max_decoder_steps
        mels: list = [None] * len(texts)
        stopped: list = [None] * len(texts)
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            n = int(lens[idx].max())
            b = len(idx)
            mel, mel_lens, _ = self.model.generate(
                tokens[idx, :n].to(self.device), lens[idx].to(self.device),
                ref_mel.expand(b, -1, -1).to(self.device), ref_lens.expand(b).to(self.device),
                generator=gen)
            for j, i in enumerate(idx):
                length = int(mel_lens[j])
                mels[i] = mel[j, :length].float().cpu()
                stopped[i] = length < cap * r
        return mels, stopped

    def vocode(self, mels: list[torch.Tensor]) -> list[np.ndarray]:
        """(T, M) log-mels → waveforms of T * hop samples each, one at a time (lengths differ
        and the vocoder is fully convolutional)."""
        return [self.to_wave(m) for m in mels]

    def synthesize(self, texts: list[str], reference=None, seed: int = 0,
                   batch_size: int = 16) -> list[Synthesis]:
        """texts → one :class:`Synthesis` each; silent or cut results are warned about."""
        self.log(vocode.GRIFFIN_LIM_NOTE if self.to_wave.griffin_lim else f"vocoder: {self.to_wave.name}")
        parts = [(i, s) for i, t in enumerate(texts) for s in self.sentences(t)]
        mels, stopped = self.mels([s for _, s in parts], reference, seed, batch_size)
        wavs = self.vocode(mels)
        hop = self.cfg.audio.hop_length  # whole hops keep every wav a whole number of frames
        pause = np.zeros(round(PAUSE_SECONDS * self.sample_rate / hop) * hop, dtype=np.float32)
        results = []
        for i, text in enumerate(texts):
            mine = [k for k, (owner, _) in enumerate(parts) if owner == i]
            pieces = [x for k in mine for x in (pause, wavs[k])][1:]  # pause between sentences
            res = Synthesis(text, np.concatenate(pieces).astype(np.float32), self.sample_rate,
                            parts=len(mine), cut=sum(not stopped[k] for k in mine))
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
