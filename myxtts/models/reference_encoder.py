"""Reference encoder: a reference mel (another utterance of the target voice) → K conditioning
latents, as in XTTS's conditioning encoder + perceiver resampler.

    ref mel (B, Tr, n_mels) → conv stack (x4 downsampling in time) → (B, Tr/4, d)
      → perceiver resampler: K learned latents cross-attend to the features
      → (B, K, d)

Padding: positions beyond ``ref_lens`` are zeroed before every convolution, which is exactly what
a convolution's own zero padding would see at the end of an unpadded clip; so outputs do not
depend on how much padding a batch carries. The resampler masks them as keys.

Keys: the reference's features only. Flamingo's and XTTS's resamplers let the latents attend
to [features ; themselves]; on the demo corpus that let training settle, from its first hundred
steps, on latents that read only themselves (attention share on the features 2e-6): the same
mels for every reference, the cloned voice lost, under one seed and not another. A latent that
cannot look away from the reference cannot lose it.

(``model.ref_self_keys`` keeps the old keys, for model files written before this.)

No reference (``ref_lens == 0``): then, and only then, the latents attend to themselves, which
gives a well-defined output that depends only on learned weights: the *neutral voice*. Training
drops the reference with probability ``model.ref_dropout`` so that this neutral voice is learned
(synthesis without ``--reference`` uses it).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from myxtts.config import ModelConfig
from myxtts.models.layers import CrossBlock, attention_bias, compute_dtype, in_compute_dtype, length_mask, norm


class ReferenceEncoder(nn.Module):
    def __init__(self, cfg: ModelConfig, n_mels: int):
        super().__init__()
        c, d = cfg.ref_channels, cfg.d_model
        # (in, out, stride): two stride-2 layers give 4x fewer keys for the resampler, so a 10 s
        # reference (~860 frames) costs ~215 keys.
        spec = [(n_mels, c, 1), (c, c, 2), (c, c, 2)]
        self.convs = nn.ModuleList(nn.Conv1d(i, o, 3, stride=s, padding=1) for i, o, s in spec)
        self.strides = [s for _, _, s in spec]
        self.proj = nn.Linear(c, d)
        self.latents = nn.Parameter(torch.randn(cfg.n_latents, d) * 0.02)  # (K, d)
        self.blocks = nn.ModuleList(
            CrossBlock(d, cfg.n_heads, cfg.ff_mult, cfg.dropout) for _ in range(cfg.ref_layers))
        self.norm = norm(d)
        self.self_keys = cfg.ref_self_keys

    def forward(self, ref_mel: torch.Tensor, ref_lens: torch.Tensor) -> torch.Tensor:
        """ref_mel (B, Tr, n_mels) normalised log-mel, ref_lens (B,) → latents (B, K, d)."""
        b = ref_mel.shape[0]
        lens = ref_lens
        x = ref_mel.transpose(1, 2)  # (B, n_mels, Tr)
        for conv, stride in zip(self.convs, self.strides):
            x = x * length_mask(lens, x.shape[-1])[:, None, :].to(x.dtype)  # zero the padding
            x = F.gelu(conv(x))  # (B, C, T')
            lens = (lens + stride - 1) // stride  # ceil: a k=3, pad=1 conv keeps ceil(L / s)
        feats = self.proj(x.transpose(1, 2))  # (B, Tr', d)
        mask = length_mask(lens, feats.shape[1])  # (B, Tr')
        k, d = self.latents.shape
        lat = in_compute_dtype(self.latents).repeat(b, 1)  # rows (B*K, d): K per reference, as feats
        own = (ref_lens == 0)[:, None].expand(b, k)  # (B, K): self-keys for the neutral voice
        if self.self_keys:  # and beside every reference (model files before format 5)
            own = mask.new_ones(b, k)
        mask = torch.cat([mask, own], dim=1)  # (B, Tr' + K)
        bias = attention_bias(mask, compute_dtype(feats))  # (B, 1, 1, Tr' + K)
        for block in self.blocks:
            lat = block(lat, feats, bias)  # (B*K, d)
        return self.norm(lat).view(b, k, d)
