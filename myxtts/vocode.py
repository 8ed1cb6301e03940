"""Mel → waveform: a trained vocoder, or Griffin-Lim where there is none.

Which one is used, without being asked: an acoustic run's vocoder lives in ``RUN/vocoder/``
(trained there with ``myxtts train --stage vocoder --out RUN/vocoder``), and everything that
turns that run's mels into audio (``synthesize``, ``eval``, the training samples and the
periodic evaluation) uses it when it holds a checkpoint. ``--vocoder PATH`` names another one
and ``--vocoder griffin-lim`` asks for none. Each says which it used (:attr:`MelToWave.name`).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from myxtts import audio
from myxtts.config import AudioConfig
from myxtts.errors import UserError
from myxtts.models.checkpoint import load_model
from myxtts.rundir import RunDir, resolve_checkpoint

GRIFFIN_LIM = "griffin-lim"
# mel features that must match between a vocoder and the model whose mels it turns into audio,
# and between a model and the cache it is evaluated on
MEL_KEYS = ("sample_rate", "n_mels", "n_fft", "hop_length", "win_length", "fmin", "fmax")
GRIFFIN_LIM_NOTE = ("note: no vocoder trained for this run, using Griffin-Lim: it needs no training but sounds "
                    "noticeably worse (phasey, metallic); `myxtts train --stage vocoder --out RUN/vocoder` "
                    "trains one that is then used by default")


def min_frames(audio_cfg: AudioConfig) -> int:
    """The fewest mel frames a vocoder is given: an STFT cannot frame a clip shorter than n_fft,
    so shorter mels (an untrained model may stop at once) are padded with silence to this many
    and the audio cut back (here and in the exported graph, myxtts.export.graph)."""
    return audio_cfg.n_fft // audio_cfg.hop_length + 2


def pad_and_cut(to_wave, mel: torch.Tensor, frames, min_frames: int, hop: int) -> torch.Tensor:
    """``to_wave`` (mel (..., T', M) → wav (..., T' * hop)) of ``mel`` (..., T, M) holding
    ``frames`` frames (an int, or a 0-dim tensor a trace records as arithmetic): the mel padded
    with silence to at least ``min_frames`` (see :func:`min_frames`), the audio cut back to
    ``frames * hop``. :class:`MelToWave` and the exported graph (myxtts.export.graph) both
    vocode this way."""
    short = mel.new_full((min_frames, mel.shape[-1]), math.log(audio.LOG_FLOOR))
    short = short.expand(*mel.shape[:-2], min_frames, mel.shape[-1])  # (..., min_frames, M)
    keep = torch.maximum(torch.as_tensor(frames), torch.tensor(min_frames))
    return to_wave(torch.cat([mel, short], dim=-2)[..., :keep, :])[..., :frames * hop]


def run_vocoder(checkpoint) -> Path | None:
    """``RUN/vocoder`` of the run ``checkpoint`` belongs to, where it holds a trained vocoder."""
    run = RunDir.of(checkpoint)
    return run.vocoder.path if run is not None and run.vocoder.has_weights() else None


class MelToWave:
    """``(T, n_mels)`` natural-log mel → ``(T * hop,)`` float32 waveform on the CPU."""

    def __init__(self, audio_cfg: AudioConfig, vocoder: torch.nn.Module | None = None,
                 name: str = GRIFFIN_LIM, device: torch.device | str = "cpu"):
        self.audio_cfg, self.vocoder, self.name, self.device = audio_cfg, vocoder, name, torch.device(device)

    @property
    def griffin_lim(self) -> bool:
        return self.vocoder is None

    @torch.no_grad()
    def __call__(self, mel: torch.Tensor) -> np.ndarray:
        a = self.audio_cfg
        if self.vocoder is None:
            to_wave = lambda m: audio.griffin_lim(m.float().cpu(), a)  # noqa: E731
        else:
            to_wave = lambda m: self.vocoder(m[None].float().to(self.device))[0]  # noqa: E731
        return pad_and_cut(to_wave, mel, mel.shape[0], min_frames(a), a.hop_length).float().cpu().numpy()

    @torch.no_grad()
    def batch(self, mels: torch.Tensor) -> np.ndarray:
        """(B, T, n_mels) mels of one length → (B, T * hop) float32: one vocoder call for all
        (the server's pieces of several sentences); Griffin-Lim runs them one by one."""
        if self.vocoder is None or mels.shape[1] < min_frames(self.audio_cfg):
            return np.stack([self(m) for m in mels])
        return self.vocoder(mels.float().to(self.device)).float().cpu().numpy()


def load(audio_cfg: AudioConfig, vocoder=None, checkpoint=None, device: torch.device | str = "cpu") -> MelToWave:
    """The mel-to-audio step for mels of ``audio_cfg``: ``vocoder`` (a vocoder run, checkpoint
    folder or model file; ``"griffin-lim"``), else the vocoder of the run ``checkpoint`` belongs
    to, else Griffin-Lim."""
    if vocoder == GRIFFIN_LIM:
        return MelToWave(audio_cfg)
    if vocoder is None:
        vocoder = run_vocoder(checkpoint) if checkpoint is not None else None
        if vocoder is None:
            return MelToWave(audio_cfg)
    model, vcfg, _, meta = load_model(resolve_checkpoint(vocoder), device)
    if meta["kind"] != "vocoder":
        raise UserError(f"{meta['path']} is an {meta['kind']} checkpoint, not a vocoder")
    diff = [f"audio.{k}: {getattr(vcfg.audio, k)} vs {getattr(audio_cfg, k)}"
            for k in MEL_KEYS if getattr(vcfg.audio, k) != getattr(audio_cfg, k)]
    if diff:
        raise UserError(f"the vocoder {meta['path']} was trained on other mel features than the "
                        f"acoustic model ({', '.join(diff)})")
    step = "" if meta["step"] is None else f" step {meta['step']}"
    return MelToWave(audio_cfg, model, f"{meta['path']} (vocoder{step})", device)
