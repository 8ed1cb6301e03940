"""HiFi-GAN generator (Kong et al. 2020): log-mel (B, T, n_mels) → waveform (B, T * hop).

Two presets (``vocoder.preset``): ``v1`` (512 initial channels, ~14M parameters, the paper's
best quality) and ``small`` (the paper's V2: 128 channels, ~0.9M parameters, fast to train and
real-time on a CPU). The upsampling rates multiply to ``audio.hop_length``: the paper's
(8, 8, 2, 2) for hop 256, otherwise a factorisation of the hop into factors of 2, 3, 5 and 8.
Weight normalisation (torch.nn.utils.parametrizations) as in the paper.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

from myxtts.config import VocoderConfig

LRELU_SLOPE = 0.1

# preset → (initial channels, resblock kernel sizes, resblock dilations)
PRESETS = {
    "v1": (512, (3, 7, 11), ((1, 3, 5), (1, 3, 5), (1, 3, 5))),
    "small": (128, (3, 7, 11), ((1, 3, 5), (1, 3, 5), (1, 3, 5))),
}


def upsample_rates(hop_length: int) -> tuple[int, ...]:
    """Factor the hop into upsampling stages, largest first: 256 → (8, 8, 2, 2)."""
    if hop_length == 256:
        return (8, 8, 2, 2)
    rates, rest = [], hop_length
    for f in (8, 5, 4, 3, 2):
        while rest % f == 0:
            rates.append(f)
            rest //= f
    if rest != 1:
        raise ValueError(f"audio.hop_length {hop_length} is not a product of 2, 3, 5 and 8; "
                         "the HiFi-GAN generator cannot upsample by it")
    return tuple(sorted(rates, reverse=True))


def _pad(kernel: int, dilation: int = 1) -> int:
    return (kernel * dilation - dilation) // 2


class ResBlock(nn.Module):
    """HiFi-GAN ResBlock1: dilated convs, each followed by an undilated one, with residuals."""

    def __init__(self, ch: int, kernel: int, dilations):
        super().__init__()
        self.convs1 = nn.ModuleList(weight_norm(nn.Conv1d(ch, ch, kernel, 1, _pad(kernel, d),
                                                          dilation=d)) for d in dilations)
        self.convs2 = nn.ModuleList(weight_norm(nn.Conv1d(ch, ch, kernel, 1, _pad(kernel)))
                                    for _ in dilations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for c1, c2 in zip(self.convs1, self.convs2):
            xt = c2(F.leaky_relu(c1(F.leaky_relu(x, LRELU_SLOPE)), LRELU_SLOPE))
            x = x + xt
        return x


class HiFiGANGenerator(nn.Module):
    def __init__(self, cfg: VocoderConfig, n_mels: int, hop_length: int):
        super().__init__()
        ch, kernels, dilations = PRESETS[cfg.preset]
        self.rates = upsample_rates(hop_length)
        self.hop_length = hop_length
        self.conv_pre = weight_norm(nn.Conv1d(n_mels, ch, 7, 1, padding=3))
        self.ups = nn.ModuleList()
        self.resblocks = nn.ModuleList()
        for i, u in enumerate(self.rates):
            # Kernel 2u (even u) or 2u+1 (odd u) with padding (k-u)//2 gives exactly L*u samples.
            k = 2 * u if u % 2 == 0 else 2 * u + 1
            c_in, c_out = ch // 2 ** i, ch // 2 ** (i + 1)
            up = nn.ConvTranspose1d(c_in, c_out, k, u, padding=(k - u) // 2)
            self.ups.append(weight_norm(up))
            self.resblocks.append(nn.ModuleList(ResBlock(c_out, kk, dd)
                                                for kk, dd in zip(kernels, dilations)))
        self.conv_post = weight_norm(nn.Conv1d(ch // 2 ** len(self.rates), 1, 7, 1, padding=3))
        for m in self.modules():
            if isinstance(m, (nn.Conv1d, nn.ConvTranspose1d)):
                nn.init.normal_(m.weight, 0.0, 0.01)  # the paper's init

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        """mel (B, T, n_mels) natural-log mel → wav (B, T * hop) in [-1, 1]."""
        x = self.conv_pre(mel.transpose(1, 2))  # (B, C, T)
        for up, blocks in zip(self.ups, self.resblocks):
            x = up(F.leaky_relu(x, LRELU_SLOPE))  # (B, C/2, T*u)
            x = sum(block(x) for block in blocks) / len(blocks)
        x = self.conv_post(F.leaky_relu(x))  # (B, 1, T * hop); default slope, as in the paper
        return torch.tanh(x).squeeze(1)


def random_segments(mel: torch.Tensor, wav: torch.Tensor, mel_lens: torch.Tensor,
                    segment_frames: int, hop: int, generator: torch.Generator | None = None):
    """Crop one aligned random segment per utterance, without host syncs or data-dependent
    shapes (gather with per-row offsets): mel (B, Tm, M), wav (B, Tm * hop), mel_lens (B,) →
    (B, segment_frames, M), (B, segment_frames * hop). Utterances shorter than the segment
    start at 0 and include their padding (silence)."""
    b = mel.shape[0]
    room = (mel_lens - segment_frames).clamp(min=0).float()  # (B,)
    u = torch.rand(b, generator=generator, device=mel.device if generator is None
                   else generator.device).to(mel.device)
    start = (u * (room + 1)).long().clamp(max=mel.shape[1] - segment_frames)  # (B,)
    f_idx = start[:, None] + torch.arange(segment_frames, device=mel.device)  # (B, F)
    mel_seg = torch.gather(mel, 1, f_idx[..., None].expand(-1, -1, mel.shape[2]))
    s_idx = start[:, None] * hop + torch.arange(segment_frames * hop, device=wav.device)
    return mel_seg, torch.gather(wav, 1, s_idx)
