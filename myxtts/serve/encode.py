"""Audio out in the formats of the OpenAI speech API.

``pcm`` is what the API defines it as: 24 kHz, 16-bit signed little-endian, mono, no header;
the model's rate is resampled with a streaming soxr resampler, so pieces resampled one after
another join as the whole would. ``wav`` and ``flac`` keep the model's own rate (their headers say
it). ``mp3`` and ``opus`` (in Ogg) are written by libsndfile (through soundfile, already a
dependency; LGPL) at 24 kHz, a rate both allow. ``aac`` has no maintained writer that runs
offline without GPL tools, and is refused.

Only ``pcm`` streams as it is made: a header-led format sent in pieces makes players read the
next header as audio (a click), so ``wav``, ``flac``, ``mp3`` and ``opus`` are sent whole.
"""
from __future__ import annotations

import io

import numpy as np
import soundfile as sf
import soxr

PCM_RATE = 24000
FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")  # the API's list
SUPPORTED = ("mp3", "opus", "flac", "wav", "pcm")
CONTENT_TYPES = {"mp3": "audio/mpeg", "opus": "audio/ogg", "flac": "audio/flac", "wav": "audio/wav",
                 "pcm": "audio/pcm"}
# soundfile (format, subtype, rate or None for the model's)
_WRITERS = {"wav": ("WAV", "PCM_16", None), "flac": ("FLAC", "PCM_16", None),
            "mp3": ("MP3", "MPEG_LAYER_III", PCM_RATE), "opus": ("OGG", "OPUS", PCM_RATE)}


def to_int16(wav: np.ndarray) -> bytes:
    """float (S,) in [-1, 1] → 16-bit little-endian bytes."""
    return (np.clip(wav, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


class PcmStream:
    """Pieces at the model's rate → 24 kHz pcm bytes, continuous across pieces."""

    def __init__(self, sample_rate: int):
        self.resampler = None if sample_rate == PCM_RATE else soxr.ResampleStream(
            sample_rate, PCM_RATE, 1, dtype="float32")

    def feed(self, wav: np.ndarray, last: bool = False) -> bytes:
        if self.resampler is None:
            return to_int16(wav)
        return to_int16(self.resampler.resample_chunk(np.ascontiguousarray(wav, dtype=np.float32), last=last))


def rate_of(fmt: str, sample_rate: int) -> int:
    """The sample rate a response in ``fmt`` is at."""
    return PCM_RATE if fmt == "pcm" else (_WRITERS[fmt][2] or sample_rate)


def encode(wav: np.ndarray, sample_rate: int, fmt: str) -> bytes:
    """A whole clip (S,) float32 at ``sample_rate`` → the bytes of a ``fmt`` file."""
    if fmt == "pcm":
        return PcmStream(sample_rate).feed(wav, last=True)
    kind, subtype, rate = _WRITERS[fmt]
    if rate and rate != sample_rate:
        wav = soxr.resample(wav.astype(np.float32), sample_rate, rate)
    buf = io.BytesIO()
    sf.write(buf, np.clip(wav, -1.0, 1.0), rate or sample_rate, format=kind, subtype=subtype)
    return buf.getvalue()
