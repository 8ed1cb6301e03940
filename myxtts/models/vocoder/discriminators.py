"""HiFi-GAN discriminators: multi-period (MPD, periods 2, 3, 5, 7, 11) and multi-scale (MSD,
raw / x2 / x4 average-pooled audio). Each sub-discriminator returns (logits, feature maps); the
feature maps feed the feature-matching loss.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm, weight_norm

from myxtts.models.vocoder.generator import LRELU_SLOPE


class PeriodDiscriminator(nn.Module):
    """Folds the waveform into (T/p, p) and runs 2-D convs over the time axis only, so it sees
    every p-th sample: periodic structure (pitch harmonics) that a 1-D view blurs."""

    def __init__(self, period: int):
        super().__init__()
        self.period = period
        chans = [1, 32, 128, 512, 1024]
        self.convs = nn.ModuleList(
            weight_norm(nn.Conv2d(i, o, (5, 1), (3, 1), padding=(2, 0)))
            for i, o in zip(chans, chans[1:]))
        self.convs.append(weight_norm(nn.Conv2d(1024, 1024, (5, 1), 1, padding=(2, 0))))
        self.conv_post = weight_norm(nn.Conv2d(1024, 1, (3, 1), 1, padding=(1, 0)))

    def forward(self, x: torch.Tensor):
        """x (B, 1, S) → logits (B, N), feature maps."""
        b, c, s = x.shape
        if s % self.period:  # static shape arithmetic, no data dependence
            pad = self.period - s % self.period
            x = F.pad(x, (0, pad), mode="reflect")
            s = s + pad
        x = x.view(b, c, s // self.period, self.period)  # (B, 1, S/p, p)
        return _conv_stack(self.convs, self.conv_post, x)


def _conv_stack(convs: nn.ModuleList, post: nn.Module, x: torch.Tensor):
    """Leaky-ReLU conv stack → (logits flattened to (B, N), every layer's output for the
    feature-matching loss)."""
    fmaps = []
    for conv in convs:
        x = F.leaky_relu(conv(x), LRELU_SLOPE)
        fmaps.append(x)
    x = post(x)
    fmaps.append(x)
    return x.flatten(1), fmaps


class ScaleDiscriminator(nn.Module):
    def __init__(self, use_spectral_norm: bool = False):
        super().__init__()
        norm = spectral_norm if use_spectral_norm else weight_norm
        # (in, out, kernel, stride, groups)
        spec = [(1, 16, 15, 1, 1), (16, 64, 41, 4, 4), (64, 256, 41, 4, 16),
                (256, 1024, 41, 4, 64), (1024, 1024, 41, 4, 256), (1024, 1024, 5, 1, 1)]
        self.convs = nn.ModuleList(norm(nn.Conv1d(i, o, k, s, groups=g, padding=k // 2))
                                   for i, o, k, s, g in spec)
        self.conv_post = norm(nn.Conv1d(1024, 1, 3, 1, padding=1))

    def forward(self, x: torch.Tensor):
        """x (B, 1, S) → logits (B, N), feature maps."""
        return _conv_stack(self.convs, self.conv_post, x)


class MultiPeriodDiscriminator(nn.Module):
    def __init__(self, periods=(2, 3, 5, 7, 11)):
        super().__init__()
        self.discriminators = nn.ModuleList(PeriodDiscriminator(p) for p in periods)

    def forward(self, wav: torch.Tensor):
        """wav (B, S) → ([logits per sub-discriminator], [feature maps per sub-discriminator])."""
        x = wav.unsqueeze(1)  # (B, 1, S)
        outs = [d(x) for d in self.discriminators]
        return [o[0] for o in outs], [o[1] for o in outs]


class MultiScaleDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()
        # The raw-scale discriminator uses spectral norm, the pooled ones weight norm (paper).
        self.discriminators = nn.ModuleList([ScaleDiscriminator(True), ScaleDiscriminator(),
                                             ScaleDiscriminator()])
        self.pool = nn.AvgPool1d(4, 2, padding=2)

    def forward(self, wav: torch.Tensor):
        """wav (B, S) → ([logits per scale], [feature maps per scale])."""
        x = wav.unsqueeze(1)  # (B, 1, S)
        logits, fmaps = [], []
        for i, d in enumerate(self.discriminators):
            if i:
                x = self.pool(x)
            lo, fm = d(x)
            logits.append(lo)
            fmaps.append(fm)
        return logits, fmaps
