"""Text encoder: token embedding + scaled sinusoidal positions + pre-norm transformer.

Absolute positions are *added* to the embeddings (Transformer-TTS, Li et al. 2019) rather than
rotated into self-attention only: the decoder's alignment cross-attention must know *where* in the
sentence each memory vector sits to learn a monotonic, diagonal alignment, and an additive code
survives into the memory it attends to. A learned scale ``alpha`` lets the model balance position
against token identity.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from myxtts.config import ModelConfig
from myxtts.models.layers import (
    EncoderBlock,
    attention_bias,
    compute_dtype,
    in_compute_dtype,
    length_mask,
    norm,
    sinusoidal_positions,
)


class TextEncoder(nn.Module):
    def __init__(self, cfg: ModelConfig, n_vocab: int):
        super().__init__()
        d = cfg.d_model
        # padding_idx=0 keeps the pad embedding at zero and out of the gradient.
        self.embed = nn.Embedding(n_vocab, d, padding_idx=0)
        self.alpha = nn.Parameter(torch.ones(1))
        self.blocks = nn.ModuleList(
            EncoderBlock(d, cfg.n_heads, cfg.ff_mult, cfg.dropout) for _ in range(cfg.text_layers))
        self.norm = norm(d)
        self.dropout = nn.Dropout(cfg.dropout)
        self.scale = math.sqrt(d)

    def forward(self, tokens: torch.Tensor, token_lens: torch.Tensor):
        """tokens (B, Tt) long, token_lens (B,) → memory (B, Tt, d), mask (B, Tt) bool."""
        mask = length_mask(token_lens, tokens.shape[1])  # (B, Tt)
        pos = sinusoidal_positions(torch.arange(tokens.shape[1], device=tokens.device),
                                   self.embed.embedding_dim)  # (Tt, d)
        # Embeddings are initialised at std 1/sqrt(d) (see XTTS._init_weights); x sqrt(d) brings
        # them to unit scale, the same as the position code.
        x = self.embed(tokens) * self.scale + self.alpha * pos.to(self.embed.weight.dtype)
        x = self.dropout(in_compute_dtype(x))  # (B, Tt, d): the residual stream's dtype from here
        bias = attention_bias(mask, compute_dtype(x))  # (B, 1, 1, Tt)
        b, tt, d = x.shape
        x = x.reshape(b * tt, d)  # rows: each projection a plain matmul (layers.Attention)
        for block in self.blocks:
            x = block(x, bias)  # (B*Tt, d)
        return self.norm(x).view(b, tt, d), mask
