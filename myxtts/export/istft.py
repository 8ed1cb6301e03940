"""The vocoder's inverse STFT in operators every ONNX runtime has: two matmuls and a transposed
convolution, where :class:`myxtts.models.vocoder.InverseSTFT` uses ``irfft`` and ``fold``
(ONNX's DFT and Col2Im are missing from many runtimes and from torch's exporter).

Same framing as the vocoder's: frame t covers samples ``[t * hop - pad, t * hop - pad + n_fft)``,
``pad = (n_fft - hop) / 2``, so T frames give T * hop samples. Against ``torch.istft``
(``center=True``, whose frames start ``n_fft / 2`` earlier) the two agree on the samples from
``hop / 2`` on: see tests/export/test_istft.py.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class MatmulISTFT(nn.Module):
    """(magnitude, phase), each (B, n_fft/2+1, T) → (B, T * hop) waveform."""

    def __init__(self, n_fft: int, hop: int):
        super().__init__()
        self.n_fft, self.hop, self.pad = n_fft, hop, (n_fft - hop) // 2
        n_bins = n_fft // 2 + 1
        k = torch.arange(n_bins, dtype=torch.float64)[:, None]  # (F, 1)
        n = torch.arange(n_fft, dtype=torch.float64)[None, :]  # (1, N)
        # irfft: x[n] = (1/N) sum_k c_k (Re_k cos(2 pi k n / N) - Im_k sin(2 pi k n / N)), c_k = 2
        # for the bins that stand for a conjugate pair too, 1 for DC and Nyquist (whose imaginary
        # parts irfft ignores: their sine rows are zero).
        c = torch.full((n_bins, 1), 2.0, dtype=torch.float64)
        c[0] = 1.0
        if n_fft % 2 == 0:
            c[-1] = 1.0
        window = torch.hann_window(n_fft, dtype=torch.float64)  # (N,): the synthesis window, folded in
        angle = 2 * math.pi * k * n / n_fft  # (F, N)
        self.register_buffer("cos_basis", (c * torch.cos(angle) / n_fft * window).T.float().contiguous())  # (N, F)
        self.register_buffer("sin_basis", (-c * torch.sin(angle) / n_fft * window).T.float().contiguous())  # (N, F)
        # Overlap-add: a transposed convolution whose kernel places frame sample n at offset n.
        self.register_buffer("ola", torch.eye(n_fft)[:, None, :])  # (N, 1, N)
        self.register_buffer("window_sq", window.square().float()[None, None, :])  # (1, 1, N)

    def forward(self, mag: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
        frames = (self.cos_basis @ (mag * torch.cos(phase))
                  + self.sin_basis @ (mag * torch.sin(phase)))  # (B, N, T), windowed
        y = F.conv_transpose1d(frames, self.ola, stride=self.hop)[:, 0]  # (B, (T-1)*hop + N)
        ones = torch.ones_like(frames[:1, :1])  # (1, 1, T)
        env = F.conv_transpose1d(ones, self.window_sq, stride=self.hop)[0, 0]  # ((T-1)*hop + N,)
        y = y / env.clamp(min=1e-8)
        return y[:, self.pad: y.shape[1] - self.pad]  # (B, T * hop)


class ExportableVocoder(nn.Module):
    """A trained :class:`~myxtts.models.vocoder.VocosGenerator` with :class:`MatmulISTFT` in
    place of its own inverse STFT: mel (B, T, n_mels) → wav (B, T * hop)."""

    def __init__(self, generator: nn.Module, n_fft: int, hop: int):
        super().__init__()
        self.generator = generator
        self.istft = MatmulISTFT(n_fft, hop)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        return self.istft(*self.generator.spectrum(mel))
