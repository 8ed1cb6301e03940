"""Audio front end: load (soundfile), down-mix, resample (soxr), trim, loudness, log-mel (torch).

The mel transform is a torch module so the very same code runs on a CPU at prepare time, batched
on the GPU in on-the-fly mode, and inside the vocoder's mel loss. Frame convention (HiFi-GAN's):
the waveform is reflect-padded by (n_fft - hop) / 2 on each side and framed without centring, so
a clip of S samples gives exactly S // hop frames and a vocoder maps T frames back to T * hop
samples.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr
import torch

from myxtts.config import AudioConfig
from myxtts.errors import UserError
from myxtts.files import atomic_write

LOG_FLOOR = 1e-5  # clamp before log: log(1e-5) = -11.5 is the mel value of digital silence
SILENCE_RMS = 10 ** (-60 / 20)  # a clip whose loudest frame is below -60 dBFS counts as silent


class AudioError(Exception):
    """An audio file could not be used; the message is the reason shown to the user."""


def load_audio(path: str | Path, sample_rate: int) -> np.ndarray:
    """Read any soundfile-supported file → mono float32 at ``sample_rate``, shape (S,)."""
    path = Path(path)
    if not path.is_file():
        raise AudioError("audio file not found")
    if path.stat().st_size == 0:
        raise AudioError("audio file is empty (0 bytes)")
    try:
        data, sr = sf.read(str(path), dtype="float32", always_2d=True)  # (S, C)
    except (sf.LibsndfileError, RuntimeError, ValueError) as e:
        raise AudioError(f"unreadable audio ({str(e).strip() or type(e).__name__})") from None
    if data.shape[0] == 0:
        raise AudioError("audio has no samples")
    wav = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
    if sr != sample_rate:
        wav = soxr.resample(wav, sr, sample_rate, quality="HQ")
    if not np.all(np.isfinite(wav)):
        raise AudioError("audio contains NaN or infinite samples")
    return np.ascontiguousarray(wav, dtype=np.float32)


def trim_silence(wav: np.ndarray, top_db: float, frame: int = 1024, hop: int = 256) -> np.ndarray:
    """Cut leading/trailing frames quieter than ``top_db`` below the loudest frame."""
    if wav.size < frame:
        return wav
    n = 1 + (wav.size - frame) // hop
    idx = np.arange(frame)[None, :] + hop * np.arange(n)[:, None]
    rms = np.sqrt(np.mean(wav[idx] ** 2, axis=1) + 1e-12)  # (n,)
    if rms.max() < SILENCE_RMS:  # nothing but noise floor: relative thresholds would keep it all
        return wav[:0]
    db = 20 * np.log10(rms / rms.max())
    loud = np.flatnonzero(db > -top_db)
    if loud.size == 0:
        return wav[:0]
    start, end = loud[0] * hop, min(wav.size, loud[-1] * hop + frame)
    return wav[start:end]


def normalize_loudness(wav: np.ndarray, target_dbfs: float) -> np.ndarray:
    """Scale to an RMS of ``target_dbfs``, backing off so the peak stays below full scale."""
    rms = float(np.sqrt(np.mean(wav.astype(np.float64) ** 2)))
    if rms < 1e-8:
        return wav
    gain = 10 ** (target_dbfs / 20) / rms
    peak = float(np.abs(wav).max()) * gain
    if peak > 0.999:
        gain *= 0.999 / peak
    return (wav * gain).astype(np.float32)


def change_speed(wav: np.ndarray, speed: float, sample_rate: int) -> np.ndarray:
    """``wav`` played ``speed`` times as fast: tempo, pitch and formants all scaled by ``speed``
    (resampled to ``sample_rate / speed`` and read at ``sample_rate``; Kaldi's speed perturbation)."""
    if speed == 1.0:
        return wav
    return soxr.resample(wav, sample_rate, sample_rate / speed, quality="HQ").astype(np.float32)


def preprocess(wav: np.ndarray, cfg: AudioConfig) -> np.ndarray:
    """The per-clip conditioning applied at prepare time (and to reference clips at inference)."""
    if cfg.trim_silence:
        wav = trim_silence(wav, cfg.trim_db)
    if cfg.normalize_loudness:
        wav = normalize_loudness(wav, cfg.target_dbfs)
    # Cut to a whole number of hops so mel frames and waveform samples line up exactly.
    return wav[: (wav.size // cfg.hop_length) * cfg.hop_length]


def _mel_filter_args(sr: int, n_fft: int, n_mels: int, fmin: float, fmax: float) -> dict:
    """The filterbank settings, spelled out once so the mel transform and its inverse agree:
    Slaney-style mel scale with area-normalised triangles (librosa's defaults, made explicit)."""
    return dict(sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax or None, htk=False,
                norm="slaney")


@lru_cache(maxsize=8)
def _mel_basis(sr: int, n_fft: int, n_mels: int, fmin: float, fmax: float) -> np.ndarray:
    import librosa.filters  # imported lazily: the filterbank is built once per setting

    return librosa.filters.mel(**_mel_filter_args(sr, n_fft, n_mels, fmin, fmax))  # (M, F)


def magnitude_from_mel(cfg: AudioConfig) -> torch.Tensor:
    """(F, M), F = n_fft / 2 + 1: the matrix that reads STFT magnitudes back from a mel's bands
    (the exp of :class:`MelSpectrogram`'s log-mel), without a fit. A band's mel is its mean
    magnitude times its filter's sum; each bin takes the mean magnitudes of the bands over it,
    weighted by their triangles, and the bins above the top band (``fmax``), which the mel says
    nothing of though speech has energy there, the top covered bin's; a bin below the lowest
    band (DC) reads 0. Smooth and non-negative, where the pseudo-inverse leaves negative holes."""
    basis = torch.from_numpy(_mel_basis(cfg.sample_rate, cfg.n_fft, cfg.n_mels, cfg.fmin,
                                        cfg.fmax)).double()  # (M, F)
    weight = basis.T  # (F, M)
    cover = weight.sum(1)  # (F,)
    inverse = weight / (cover.clamp(min=1e-12)[:, None] * basis.sum(1)[None, :])  # (F, M)
    top = int((cover > 0).nonzero().max())
    inverse[top + 1:] = inverse[top]
    return inverse.float()


class MelSpectrogram(torch.nn.Module):
    """(B, S) waveform in [-1, 1] → (B, T, n_mels) natural-log mel, T = S // hop."""

    def __init__(self, cfg: AudioConfig):
        super().__init__()
        self.n_fft, self.hop, self.win = cfg.n_fft, cfg.hop_length, cfg.win_length
        basis = _mel_basis(cfg.sample_rate, cfg.n_fft, cfg.n_mels, cfg.fmin, cfg.fmax)
        self.register_buffer("basis", torch.from_numpy(basis).float(), persistent=False)  # (M, F)
        self.register_buffer("window", torch.hann_window(cfg.win_length), persistent=False)

    def magnitude(self, wav: torch.Tensor) -> torch.Tensor:
        pad = (self.n_fft - self.hop) // 2
        x = torch.nn.functional.pad(wav.float().unsqueeze(1), (pad, pad), mode="reflect").squeeze(1)
        spec = torch.stft(x, self.n_fft, self.hop, self.win, self.window, center=False,
                          return_complex=True)  # (B, F, T)
        return spec.abs()

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        mag = self.magnitude(wav)  # (B, F, T)
        mel = torch.matmul(self.basis, mag)  # (B, M, T)
        return torch.log(torch.clamp(mel, min=LOG_FLOOR)).transpose(1, 2)  # (B, T, M)


def mel_spectrogram(wav: np.ndarray, cfg: AudioConfig) -> np.ndarray:
    """One clip (S,) → (S // hop, n_mels) float32 log-mel, on the CPU."""
    with torch.no_grad():
        return _module(cfg)(torch.from_numpy(wav)[None])[0].contiguous().numpy()


@lru_cache(maxsize=4)
def _module_cached(key) -> MelSpectrogram:
    return MelSpectrogram(AudioConfig(**dict(key)))


def _module(cfg: AudioConfig) -> MelSpectrogram:
    return _module_cached(tuple(sorted(vars(cfg).items())))


def griffin_lim(mel: torch.Tensor, cfg: AudioConfig, n_iter: int = 60) -> torch.Tensor:
    """(T, n_mels) log-mel → (T * hop,) waveform, at the level the mel describes.

    A fallback only: it needs no training but sounds audibly worse (phasey, metallic) than a
    trained vocoder. The mel is undone the way :class:`MelSpectrogram` built it: exp of the
    natural log, then a non-negative least-squares fit of STFT *magnitudes* (power 1) through the
    same Slaney filterbank; Griffin-Lim then finds the phases. No gain is applied, so a silent
    mel gives a silent waveform (only a peak above full scale is scaled down).
    """
    import librosa  # imported lazily: only synthesis without a vocoder needs it

    n_out, device = mel.shape[0] * cfg.hop_length, mel.device
    mel = mel.detach().cpu().double()
    short = -(-cfg.n_fft // cfg.hop_length) + 1 - mel.shape[0]
    if short > 0:  # the STFT needs n_fft samples to frame: pad with silence, cut after
        mel = torch.cat([mel, mel.new_full((short, mel.shape[1]), float(np.log(LOG_FLOOR)))])
    mel_energy = np.exp(mel.numpy().T)  # (M, T)
    fb = _mel_filter_args(cfg.sample_rate, cfg.n_fft, cfg.n_mels, cfg.fmin, cfg.fmax)
    del fb["n_mels"]  # mel_to_stft takes the band count from the mel itself
    mag = librosa.feature.inverse.mel_to_stft(mel_energy, power=1.0, **fb)  # (F, T)
    # librosa centres frame t on sample t * hop; ours (reflect pad of (n_fft - hop) / 2, no
    # centring) sits on t * hop + hop / 2: shift by half a hop so samples line up with our
    # frames. The last half hop, past the final frame's centre, stays silent.
    wav = librosa.griffinlim(mag, n_iter=n_iter, hop_length=cfg.hop_length,
                             win_length=cfg.win_length, n_fft=cfg.n_fft, window="hann",
                             center=True, random_state=0)  # ((T - 1) * hop,)
    half = cfg.hop_length // 2
    wav = np.pad(wav, (half, max(0, n_out - half - wav.size)))[:n_out]
    peak = float(np.abs(wav).max()) if wav.size else 0.0
    if peak > 0.999:  # an over-loud mel would clip when written as 16-bit PCM
        wav = wav * (0.999 / peak)
    return torch.from_numpy(wav.astype(np.float32)).to(device)


def save_wav(path: str | Path, wav, sample_rate: int) -> None:
    """Write a mono float waveform as 16-bit PCM WAV, whole or not at all (:func:`atomic_write`)."""
    if isinstance(wav, torch.Tensor):
        wav = wav.detach().float().cpu().numpy()
    try:
        with atomic_write(path) as tmp:  # the temporary name has no .wav: the format is named
            sf.write(str(tmp), np.clip(wav, -1.0, 1.0), sample_rate, format="WAV", subtype="PCM_16")
    except (OSError, RuntimeError) as e:  # a parent that is a file, a read-only folder, a full disk
        raise UserError(f"{path}: cannot write the wav ({e.strerror if isinstance(e, OSError) else e})") from None
