"""Speaker embeddings: Resemblyzer's GE2E voice encoder (weights shipped in its package): what
`eval` scores voices with and what `model.speaker_embedding=ge2e` conditions on.

The encoder is the one ``resemblyzer.VoiceEncoder`` builds (a 3-layer LSTM over 40-band mels
of 16 kHz audio, 25 ms windows, 10 ms hop, 1.6 s partials at 1.3 partials a second, L2-normed
mean), loaded from the package's ``pretrained.pt`` by path. The package itself is not imported:
its audio module imports ``webrtcvad``, which needs ``pkg_resources`` (removed from setuptools
81). Its voice-activity trimming is therefore replaced by the project's own silence trim
(``audio.trim_silence``); volume normalisation is the package's (-30 dBFS, raise only).
"""
from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np
import soxr
import torch
from torch import nn

from myxtts.audio import trim_silence
from myxtts.errors import UserError

SAMPLE_RATE = 16000
DIM = 256  # embedding size
N_MELS, WINDOW, HOP = 40, 400, 160  # 25 ms and 10 ms at 16 kHz
PARTIAL_FRAMES = 160  # 1.6 s
PARTIALS_PER_SECOND, MIN_COVERAGE = 1.3, 0.75
TARGET_DBFS = -30.0
TRIM_TOP_DB = 40.0


def weights_path() -> Path:
    spec = importlib.util.find_spec("resemblyzer")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the GE2E speaker encoder (speaker similarity, model.speaker_embedding=ge2e) "
                        "needs resemblyzer for its weights: pip install 'myxtts[eval]'")
    path = Path(next(iter(spec.submodule_search_locations))) / "pretrained.pt"
    if not path.is_file():
        raise UserError(f"{path}: the resemblyzer package has no encoder weights; reinstall it")
    return path


def resolve_setting(asked: str) -> str:
    """``model.speaker_embedding`` as asked → what a run trains with: ``auto`` is ``ge2e`` where
    the encoder's weights are installed (resemblyzer), else ``none``; the others as they are."""
    if asked != "auto":
        return asked
    try:
        weights_path()
    except UserError:
        return "none"
    return "ge2e"


class SpeakerEncoder(nn.Module):
    def __init__(self, weights: str | Path | None = None):
        super().__init__()
        self.lstm = nn.LSTM(N_MELS, 256, 3, batch_first=True)
        self.linear = nn.Linear(256, 256)
        state = torch.load(weights or weights_path(), map_location="cpu", weights_only=True)
        # the file also holds the training loss's similarity scale, which inference ignores
        self.load_state_dict({k: v for k, v in state["model_state"].items()
                              if k.startswith(("lstm.", "linear."))})
        self.eval()

    def forward(self, mels: torch.Tensor) -> torch.Tensor:
        """(B, PARTIAL_FRAMES, N_MELS) → (B, 256) L2-normed embeddings."""
        _, (hidden, _) = self.lstm(mels)
        e = torch.relu(self.linear(hidden[-1]))
        return e / e.norm(dim=1, keepdim=True).clamp_min(1e-8)

    @staticmethod
    def prepare(wav: np.ndarray, sample_rate: int) -> np.ndarray:
        """Any-rate float waveform → 16 kHz, silence trimmed, raised to -30 dBFS."""
        wav = np.asarray(wav, dtype=np.float32)
        if sample_rate != SAMPLE_RATE:
            wav = soxr.resample(wav, sample_rate, SAMPLE_RATE).astype(np.float32)
        wav = trim_silence(wav, TRIM_TOP_DB)
        rms = float(np.sqrt(np.mean(wav.astype(np.float64) ** 2))) if wav.size else 0.0
        if rms > 0:
            gain = 10 ** ((TARGET_DBFS - 20 * np.log10(rms)) / 20)
            wav = wav * max(gain, 1.0)
        return wav

    @torch.no_grad()
    def embed(self, wav: np.ndarray, sample_rate: int) -> np.ndarray | None:
        """One utterance → (256,) unit vector; None for audio with no sound in it."""
        import librosa

        wav = self.prepare(wav, sample_rate)
        if not np.any(wav):
            return None
        n_frames = int(np.ceil((wav.size + 1) / HOP))
        step = int(round(SAMPLE_RATE / PARTIALS_PER_SECOND / HOP))
        starts = list(range(0, max(1, n_frames - PARTIAL_FRAMES + step + 1), step))
        last = starts[-1] * HOP
        if len(starts) > 1 and (wav.size - last) / (PARTIAL_FRAMES * HOP) < MIN_COVERAGE:
            starts.pop()
        need = (starts[-1] + PARTIAL_FRAMES) * HOP
        wav = np.pad(wav, (0, max(0, need - wav.size)))
        mel = librosa.feature.melspectrogram(y=wav, sr=SAMPLE_RATE, n_fft=WINDOW, hop_length=HOP,
                                             n_mels=N_MELS).astype(np.float32).T  # (T, 40), power
        partials = np.stack([mel[s:s + PARTIAL_FRAMES] for s in starts])  # (P, 160, 40)
        e = self(torch.from_numpy(partials)).mean(0).numpy()
        return e / np.linalg.norm(e)


@functools.lru_cache(maxsize=1)
def shared_encoder() -> SpeakerEncoder:
    """One encoder per process, loaded on first use (synthesis embeds each reference once)."""
    return SpeakerEncoder()


def cosine(a: np.ndarray | None, b: np.ndarray | None) -> float | None:
    """Cosine of two unit embeddings; None when either is missing (silent audio)."""
    if a is None or b is None:
        return None
    return float(np.dot(a, b))
