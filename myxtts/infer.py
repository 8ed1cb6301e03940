"""A trained run loaded once to speak (``myxtts synthesize``, ``serve``, ``eval``, ``export``, the
training samples): text → sentences → token ids → audio, in two public layers as Piper's voice
has them, and one road through both.

- :meth:`Synthesizer.encode`: one sentence → the token ids the model reads (Piper's
  ``phonemize`` and ``phonemes_to_ids``); :meth:`Synthesizer.sentences` cuts a text into the
  sentences it is spoken as.
- :meth:`Synthesizer.speak_ids`: ids in a voice at a pace → mels and audio (Piper's
  ``synthesize_ids_to_raw``), decoded in batches by :func:`myxtts.speak.speak_ids`.
- :meth:`Synthesizer.synthesize`: texts → one :class:`Synthesis` each, its sentences joined
  with a short pause (Piper's ``synthesize``). Everything that speaks whole texts goes this way,
  so the same text, voice and seed make the same mels wherever they are spoken.

A text is cut at its sentence ends; a sentence is cut further only where the decoder in use
needs it: the autoregressive decoder runs into ``model.max_decoder_steps`` on a long one, the
duration decoder has no step cap to stop short of and no table of positions to run off (its
positions are computed for any length), so its sentences are kept whole. A cut falls at clause
punctuation first, between words only where a clause alone is too long
(:mod:`myxtts.text.sentences`).

The voices a run speaks in (:meth:`Synthesizer.voices`) are its training speakers (from the
cache it recorded, or ``--data``), the folders of a voices folder and the neutral voice; the
rule for a reference clip is :mod:`myxtts.speak`'s. Mels become audio through the run's own
vocoder (``RUN/vocoder``), the one ``--vocoder`` names, or Griffin-Lim (:mod:`myxtts.vocode`).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from myxtts import audio, speak, vocode
from myxtts.errors import UserError
from myxtts.models.checkpoint import load_model
from myxtts.rundir import RunDir, choose_weights, default_cache
from myxtts.speak import SILENT_DBFS, Spoken, dbfs
from myxtts.text import echo

PAUSE_SECONDS = 0.25  # silence between the sentences of one text (rounded to whole hops)
# The autoregressive decoder's sentence length limit: its cap in seconds times a slow reading
# rate (read speech in LJSpeech and the demo corpus runs at about 15-18 characters per second).
CHARS_PER_SECOND = 10
EVAL_FIGURES = ("eval_wer", "eval_cer", "eval_speaker_cosine", "eval_dnsmos_ovrl")


def pause(audio_cfg) -> np.ndarray:
    """The silence between two sentences of one text: ``PAUSE_SECONDS`` in whole hops, so every
    wav stays a whole number of frames."""
    hop = audio_cfg.hop_length
    return np.zeros(round(PAUSE_SECONDS * audio_cfg.sample_rate / hop) * hop, dtype=np.float32)


@dataclass
class Synthesis:
    """One text's audio, and what a listener should know about it before playing it."""

    text: str
    wav: np.ndarray  # (S,) float32 in [-1, 1]
    sample_rate: int
    parts: int  # sentences (or pieces of overlong ones) spoken separately, joined with pauses
    cut: int  # of those, parts that ran into model.max_decoder_steps instead of stopping
    path: Path | None = None  # where it was written, if it was
    spoken: list[Spoken] = field(default_factory=list, repr=False)  # each part as the model made it

    @property
    def mel(self) -> torch.Tensor:
        """(T, n_mels): the parts' mels one after another (the pauses are not in it)."""
        return torch.cat([sp.mel for sp in self.spoken])

    @property
    def attn(self) -> np.ndarray:
        """(steps, tokens): the parts' alignments on one diagonal, each its own block."""
        out = np.zeros((sum(sp.attn.shape[0] for sp in self.spoken), sum(sp.attn.shape[1] for sp in self.spoken)),
                       dtype=np.float32)
        r = c = 0
        for sp in self.spoken:
            out[r:r + sp.attn.shape[0], c:c + sp.attn.shape[1]] = sp.attn
            r, c = r + sp.attn.shape[0], c + sp.attn.shape[1]
        return out

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
    """A run loaded once to speak: its weights (and why they were chosen), settings, text front
    end and mel-to-audio step. Every way MyXTTS speaks goes through one: ``synthesize``,
    ``eval``, the training samples and periodic evaluation (:meth:`of` a model in memory),
    ``serve``, ``export`` and the benchmarks."""

    def __init__(self, checkpoint, vocoder=None, device: str | None = None, log=print,
                 step: int | None = None):
        """``checkpoint``: a run (its best weights, or those of ``step``: see
        :meth:`~myxtts.rundir.RunDir.choose_weights`, whose choice is logged), a checkpoint
        folder or a model file."""
        from myxtts.text import TextProcessor, Vocabulary  # the text front end of the checkpoint

        self.device, self.log, self.checkpoint = _device(device), log, checkpoint
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
        self.device, self.checkpoint = next(model.parameters()).device, None
        self.weights, self.why = None, "the model in training"
        self.meta = {"kind": "acoustic", "step": None, "path": None}
        return self

    @property
    def sample_rate(self) -> int:
        return self.cfg.audio.sample_rate

    # ------------------------------------------------------------------------ text → ids
    @property
    def languages(self) -> list[str]:
        """The languages this model speaks (espeak-ng codes), the first its own: the one list every
        way out (``synthesize --language``, ``eval``, ``serve``, ``export``) asks. Its own is its
        ``text.language`` where it speaks that, else the first of its table."""
        table = list(getattr(self.model, "languages", ())) or [self.cfg.text.language]
        own = self.cfg.text.language if self.cfg.text.language in table else table[0]
        return [own] + [code for code in table if code != own]

    def language_row(self, code: str | None = None) -> int | None:
        """The row of the model's language table that :meth:`language` ``code`` is read with;
        None for a model of one language, which has no table."""
        table = list(getattr(self.model, "languages", ()))
        return table.index(self.language(code)) if len(table) > 1 else None

    def language(self, code: str | None = None) -> str:
        """``code`` where the model speaks it, else the model's own language (None); one line
        naming a code nobody knows or the model lacks, and the languages it has."""
        from myxtts.text.languages import language_of

        if code is None:
            return self.languages[0]
        has = f"this model speaks {', '.join(self.languages)} only"
        if code not in self.languages:
            try:
                language_of(code)
            except UserError as e:  # a code nobody knows says so, and what the model has
                raise UserError(f"{e}; {has}") from None
            raise UserError(f"language {code}: {has}")
        return code

    def sentences(self, text: str, language: str | None = None) -> list[str]:
        """One text → the normalised sentences it is spoken as, each cut further only where
        the decoder needs it (see the module docstring)."""
        from myxtts.text.sentences import split_sentences

        norm = self.text.normalize(text, self.language(language))
        return split_sentences(norm, self.max_sentence_chars) or [norm]  # empty: the encoder's clear error

    @property
    def max_sentence_chars(self) -> int | None:
        """The longest sentence the decoder speaks whole: the autoregressive decoder's step cap
        at ``CHARS_PER_SECOND``; None (no limit) for the duration decoder."""
        a, m = self.cfg.audio, self.cfg.model
        if m.decoder == "duration":
            return None
        return int(m.max_decoder_steps * m.reduction * a.hop_length / a.sample_rate * CHARS_PER_SECOND)

    def encode(self, text: str, language: str | None = None, *, normalized: bool = False) -> tuple[int, ...]:
        """One sentence → the token ids the model reads, end of sentence included. Symbols the
        model was not trained on are read as their nearest known one, with a note through the
        run's log. ``normalized``: ``text`` is one of :meth:`sentences` already."""
        return tuple(self.text.encode(text, warn=self.log, normalized=normalized,
                                          language=self.language(language)))

    # ------------------------------------------------------------------------ ids → audio
    def speak_ids(self, ids: list[tuple[int, ...]], voice, *, seed: int = 0, speed: float = 1.0,
                  batch_size: int = 1, vocode: bool = True, language=None) -> list[Spoken]:
        """Sentences of ids (from :meth:`encode`) in ``voice`` (see :meth:`reference`; or a list,
        one per sentence) at ``speed``, read as ``language`` (a code, or a list of one per
        sentence; None: the model's own) → one :class:`~myxtts.speak.Spoken` each
        (:func:`myxtts.speak.speak_ids`); ``vocode`` False leaves the audio to the caller (the
        server vocodes in pieces as it streams)."""
        refs = [self.reference(v) for v in voice] if isinstance(voice, list) else self.reference(voice)
        codes = language if isinstance(language, list) else [language] * len(ids)
        rows = [self.language_row(code) for code in codes]
        return speak.speak_ids(self.model, self.cfg, ids, refs, self.to_wave if vocode else None,
                               seed=seed, batch_size=batch_size, speed=speed,
                               languages=None if None in rows else rows)

    @property
    def pause(self) -> np.ndarray:
        return pause(self.cfg.audio)

    def synthesize(self, texts: list[str], voice=None, *, seed: int = 0, batch_size: int = 16,
                   speed: float = 1.0, language: str | None = None) -> list[Synthesis]:
        """texts → one :class:`Synthesis` each: every text's :meth:`sentences`, :meth:`encode`\\ d
        and spoken together (:meth:`speak_ids`, sorted by length, ``batch_size`` at a time), then
        joined with :attr:`pause`. ``voice``: one for all texts, or a list of one per text. A
        silent result, or one cut at ``model.max_decoder_steps``, is warned about in the log."""
        refs = [self.reference(v) for v in voice] if isinstance(voice, list) else [self.reference(voice)] * len(texts)
        if len(refs) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(refs)} voices")
        parts = [(i, s) for i, t in enumerate(texts) for s in self.sentences(t, language)]
        ids = [self.encode(s, language, normalized=True) for _, s in parts]
        spoken = self.speak_ids(ids, [refs[i] for i, _ in parts], seed=seed, speed=speed, batch_size=batch_size,
                                language=language)
        results = []
        for i, text in enumerate(texts):
            mine = [sp for (owner, _), sp in zip(parts, spoken) if owner == i]
            pieces = [x for sp in mine for x in (self.pause, sp.wav)][1:]  # a pause between sentences
            res = Synthesis(text, np.concatenate(pieces).astype(np.float32), self.sample_rate,
                            parts=len(mine), cut=sum(not sp.stopped for sp in mine), spoken=mine)
            for warning in res.warnings(self.cfg.model.max_decoder_steps):
                self.log(warning)
            results.append(res)
        return results

    def synthesize_to_file(self, texts: list[str], out, reference=None, seed: int = 0,
                           batch_size: int = 16, language: str | None = None) -> list[Synthesis]:
        """Synthesise and write wavs: ``out`` is a .wav file for one text, else a directory
        (or a .wav stem, numbered). Returns the results, each with the path it was written to."""
        paths = output_paths(out, len(texts))
        for folder in {path.parent for path in paths}:  # before the work, not after it
            _check_writable(folder)
        self.log(vocode.GRIFFIN_LIM_NOTE if self.to_wave.griffin_lim else f"vocoder: {self.to_wave.name}")
        results = self.synthesize(texts, self.reference(reference), seed=seed, batch_size=batch_size,
                                  language=language)
        for path, res in zip(paths, results):
            audio.save_wav(path, res.wav, self.sample_rate)
            res.path = path
        return results

    # ------------------------------------------------------------------------ voices
    def reference(self, voice=None) -> speak.Reference:
        """A sound file → the voice to speak in (:func:`myxtts.speak.reference_from_file`); a
        folder of clips → its voice by the one folder rule (:func:`myxtts.voice.from_folder`); a
        :class:`~myxtts.voice.Voice` or :class:`~myxtts.speak.Reference` as it is; None → the
        neutral voice."""
        from myxtts.voice import Voice, from_folder

        if voice is None:
            return speak.neutral(self.cfg)
        if isinstance(voice, speak.Reference):
            return voice
        if isinstance(voice, Voice):
            return voice.reference
        if Path(voice).is_dir():
            found = from_folder(Path(voice).name, Path(voice), self.cfg, self.log, source=str(voice))
            if found is None:
                raise UserError(f"reference {voice}: the folder holds no usable clip")
            return found.reference
        return speak.reference_from_file(voice, self.cfg, self.log)

    def cache(self, data=None, required: bool = True):
        """The prepared cache ``data``, else the one the run recorded when training started
        (:func:`myxtts.rundir.default_cache`); with ``required`` False, None (said) where there
        is none."""
        from myxtts.data.cache import Cache

        if data is None:
            try:
                data = default_cache(self.checkpoint)
            except UserError:
                if required:
                    raise
                self.log("note: no --data cache given or recorded by the run: no training speakers")
                return None
        return Cache(data)

    def voices(self, data=None, folder=None) -> list:
        """The voices this run speaks in, by name (:mod:`myxtts.voice`): every speaker of
        :meth:`cache` (``data``, a folder or a cache already opened; else the one the run
        recorded), then one per sub-folder of the voices ``folder``, then the neutral voice.
        ``serve``, ``export``, the page and ``synthesize --list-voices`` list these."""
        from myxtts.data.cache import Cache
        from myxtts.voice import cache_voices, folder_voices, neutral

        cache = data if isinstance(data, Cache) else self.cache(data, required=False)
        found = cache_voices(cache, self.cfg) if cache is not None else []
        if folder is not None:
            found += folder_voices(Path(folder), self.cfg, self.log)
        return found + [neutral(self.cfg)]

    def voice(self, name: str, data=None):
        """The :class:`~myxtts.voice.Voice` of :meth:`voices` called ``name`` (``synthesize
        --voice``); a :class:`UserError` listing them, the closest first, where none is."""
        from myxtts.voice import named

        return named(self.voices(data), name)

    # ------------------------------------------------------------------------ the weights
    @functools.cached_property
    def about(self) -> dict:
        """The run loaded: :func:`about_weights` of its weights (read once, when first asked)."""
        return about_weights(self.weights, self.why, self.meta.get("step"))


def about_weights(weights: Path, why: str, step: int | None) -> dict:
    """A run's ``weights``: its folder, the weights (within the run) and ``why`` they were chosen,
    their ``step``, the steps trained and the periodic evaluation's figures logged for that step
    (None where none ran), and where the run's report is written when training ends."""
    run = RunDir.of(weights)
    info = {"folder": (run.path if run else weights.parent).name,
            "weights": weights.name if run is None else str(weights.relative_to(run.path)),
            "why": why, "step": step, "eval": None}
    records = run.read_metrics() if run is not None else []
    trained = [r["step"] for r in records if r.get("loss") is not None]
    info["steps_trained"] = max(trained) if trained else None
    evals = [r for r in records if r.get("eval_wer") is not None and r["step"] == step]
    if evals:
        info["eval"] = {k: evals[-1][k] for k in EVAL_FIGURES if evals[-1].get(k) is not None}
    info["report_path"] = str(run.report) if run is not None else None
    return info


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
