"""Text encoder: token embedding + scaled sinusoidal positions + pre-norm transformer.

Absolute positions are *added* to the embeddings (Transformer-TTS, Li et al. 2019) rather than
rotated into self-attention only: the decoder's alignment cross-attention must know *where* in the
sentence each memory vector sits to learn a monotonic, diagonal alignment, and an additive code
survives into the memory it attends to. A learned scale ``alpha`` lets the model balance position
against token identity.

A model of several languages adds a learned vector of the sentence's language to every token
(XTTS conditions on a language token; an added code leaves the sequence's length alone, so the
duration decoder has no extra token to give frames to). A model of one language has no such
table and computes what it did before languages existed.
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
    def __init__(self, cfg: ModelConfig, n_vocab: int, n_languages: int = 1):
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
        # Registered last, so that the modules before it draw their initial weights as before.
        self.language = nn.Embedding(n_languages, d) if n_languages > 1 else None

    def forward(self, tokens: torch.Tensor, token_lens: torch.Tensor, language: torch.Tensor | None = None):
        """tokens (B, Tt) long, token_lens (B,), language (B,) long (a row of the language table;
        a model of several languages needs it) → memory (B, Tt, d), mask (B, Tt) bool."""
        mask = length_mask(token_lens, tokens.shape[1])  # (B, Tt)
        pos = sinusoidal_positions(torch.arange(tokens.shape[1], device=tokens.device),
                                   self.embed.embedding_dim)  # (Tt, d)
        # Embeddings are initialised at std 1/sqrt(d) (see XTTS._init_weights); x sqrt(d) brings
        # them to unit scale, the same as the position code.
        x = self.embed(tokens) * self.scale + self.alpha * pos.to(self.embed.weight.dtype)
        if self.language is not None:
            if language is None:
                raise ValueError("this model speaks several languages: give each sentence's (language)")
            x = x + self.language(language)[:, None, :] * self.scale  # (B, 1, d): one per sentence
        x = self.dropout(in_compute_dtype(x))  # (B, Tt, d): the residual stream's dtype from here
        bias = attention_bias(mask, compute_dtype(x))  # (B, 1, 1, Tt)
        b, tt, d = x.shape
        x = x.reshape(b * tt, d)  # rows: each projection a plain matmul (layers.Attention)
        for block in self.blocks:
            x = block(x, bias)  # (B*Tt, d)
        return self.norm(x).view(b, tt, d), mask
