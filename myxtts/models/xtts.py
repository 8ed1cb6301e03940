"""The XTTS-style acoustic model: text encoder + reference encoder + mel decoder.

    tokens (B, Tt) ──TextEncoder──▶ text memory (B, Tt, d) ─┐
    ref_mel (B, Tr, M) ──ReferenceEncoder──▶ latents (B, K, d) ┤
    [ref_emb (B, 256) ──Linear──▶ one more latent (B, 1, d)]  ┴─▶ memory (B, Tt+K(+1), d)
    mel (B, Tm, M) ──MelDecoder(teacher forcing, cross-attends memory)──▶ mel_pre/mel_post,
                                                                          stop_logits, attn
                 or DurationDecoder(aligned text, ``model.decoder=duration``)──▶ mel_pre/
                                                          mel_post, log_dur, dur, attn

The decoder is picked once, from ``model.decoder`` (DECODERS), and from then on used through
the protocol both implement, with memory (B, Tk, d) = [text (n_text) ; latents] and its mask.
With ``model.speaker_embedding=ge2e`` the latents end with the reference's GE2E embedding
(:mod:`myxtts.speaker_encoder`, frozen, computed outside the model) projected to d: XTTS's speaker
embedding beside its perceiver latents, so a voice is placed by an encoder that heard thousands.
The decoders read the latents as they come, K or K+1 (K below).
A model of several languages (``languages``, the codes of its language table's rows) adds each
sentence's language to its text (:class:`~myxtts.models.text_encoder.TextEncoder`): batches and
``generate`` then carry ``language`` (B,), a row of that table. The voice comes from the reference
alone, so a voice speaks any language of the model (cross-lingual cloning).

- ``forward(mel, memory, mem_mask, mel_lens, token_lens, n_text)`` → dict of training outputs:
  mel_pre, mel_post (B, Tm, M) raw log-mel and attn (B, Tm/r, Tt), plus the decoder's own.
- ``losses(batch, out)`` → dict of 0-dim tensors: loss (the total), mel_l1, postnet_l1,
  attn_diag, plus the decoder's own terms.
- ``generate(memory, mem_mask, token_lens, n_text, max_steps, stop_threshold, generator, speed)`` →
  mels (B, T, M) raw log-mel, silence past each length; lengths (B,) in frames, at most
  max_steps * r; attn (B, T/r, Tt).

Single-device plain PyTorch: no distributed imports, no torch.compile, no autocast in here; the
trainer applies those from outside. ``forward`` and ``losses`` are free of host syncs and of
data-dependent shapes, so one compiled graph serves each bucket shape.

The returned ``attn`` is the alignment layer's attention restricted to the text keys and
renormalised to sum to one per step (see mel_decoder.text_attention), or the duration
decoder's hard alignment at the same step rate.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from myxtts.config import ModelConfig
from myxtts.models.duration_decoder import DurationDecoder
from myxtts.models.layers import Attention, FeedForward
from myxtts.models.losses import attention_diagonality, speaker_contrast
from myxtts.models.mel_decoder import MelDecoder, normalize_mel
from myxtts.models.reference_encoder import ReferenceEncoder
from myxtts.models.text_encoder import TextEncoder
from myxtts.speaker_encoder import DIM as SPEAKER_DIM

DECODERS = {"autoregressive": MelDecoder, "duration": DurationDecoder}  # by model.decoder


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


class XTTS(nn.Module):
    def __init__(self, cfg: ModelConfig, n_vocab: int, n_mels: int, languages: Sequence[str] = ()):
        """``languages``: the codes the language table's rows stand for, in order; one or none
        (a model of one language, as every model before languages) builds no table."""
        super().__init__()
        if cfg.speaker_embedding not in ("none", "ge2e"):  # auto resolves before a model is built
            raise ValueError(f"model.speaker_embedding={cfg.speaker_embedding!r}: resolve it first "
                             "(myxtts.speaker_encoder.resolve_setting)")
        self.cfg, self.n_vocab, self.n_mels, self.languages = cfg, n_vocab, n_mels, tuple(languages)
        self.text_encoder = TextEncoder(cfg, n_vocab, len(self.languages))
        self.ref_encoder = ReferenceEncoder(cfg, n_mels)
        self.speaker_proj = nn.Linear(SPEAKER_DIM, cfg.d_model) if cfg.speaker_embedding == "ge2e" else None
        self.decoder = DECODERS[cfg.decoder](cfg, n_mels)
        n_layers = cfg.text_layers + cfg.decoder_layers
        self.apply(lambda m: self._init_weights(m, n_layers))

    @staticmethod
    def _init_weights(module: nn.Module, n_layers: int) -> None:
        # GPT-2 style: small normal weights; residual-branch outputs shrunk by 1/sqrt(2L) so
        # the residual stream's variance does not grow with depth (matters for the 30-layer
        # preset).
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=module.embedding_dim ** -0.5)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        if isinstance(module, Attention):
            nn.init.normal_(module.out.weight, std=0.02 / math.sqrt(2 * n_layers))
        elif isinstance(module, FeedForward):
            nn.init.normal_(module.fc2.weight, std=0.02 / math.sqrt(2 * n_layers))
            if isinstance(module.fc1, nn.Conv1d):  # as the Linear it stands for
                nn.init.normal_(module.fc1.weight, std=0.02)
                nn.init.zeros_(module.fc1.bias)

    # ------------------------------------------------------------------------ conditioning
    def encode(self, tokens, token_lens, ref_mel, ref_lens, latents=None, ref_emb=None, language=None):
        """→ memory (B, Tt+K, d), memory mask (B, Tt+K) bool. ``latents`` (B, K, d): the
        references' conditioning computed before (:meth:`voice_latents`), in place of encoding
        ``ref_mel`` (and ``ref_emb`` (B, 256), its GE2E embedding) again. ``language`` (B,):
        each sentence's row of the language table, for a model of several languages."""
        text, text_mask = self.text_encoder(tokens, token_lens, language)  # (B, Tt, d), (B, Tt)
        if latents is not None:
            memory = torch.cat([text, latents.to(text.dtype)], dim=1)  # (B, Tt+K, d)
            return memory, torch.cat([text_mask, text_mask.new_ones(latents.shape[:2])], dim=1)
        latents = self.conditioning(ref_mel, ref_lens, ref_emb)  # (B, K, d)
        memory = torch.cat([text, latents.to(text.dtype)], dim=1)  # (B, Tt+K, d)
        mask = torch.cat([text_mask, text_mask.new_ones(latents.shape[:2])], dim=1)
        return memory, mask

    # ------------------------------------------------------------------------ training
    def forward(self, batch: dict) -> dict:
        """batch: tokens, token_lens, mel, mel_lens, ref_mel, ref_lens, and language for a model
        of several languages (see data.dataset) →
        mel_pre, mel_post (B, Tm, M), attn (B, Tm/r, Tt), and stop_logits (B, Tm/r)
        (autoregressive) or log_dur, dur (B, Tt), align_logp (B, Tm, Tt) (duration decoder);
        voice (B, d), the conditioning latents' mean, and heard (B,), rows whose reference was
        kept, for the speaker loss."""
        tokens, ref_lens = batch["tokens"], batch["ref_lens"]
        if self.training and self.cfg.ref_dropout > 0:
            # Drop the reference for some samples (by masking it out, shapes unchanged) so the
            # resampler learns a neutral voice for reference-free synthesis.
            drop = torch.rand(ref_lens.shape, device=ref_lens.device) < self.cfg.ref_dropout
            ref_lens = torch.where(drop, torch.zeros_like(ref_lens), ref_lens)
        memory, mask = self.encode(tokens, batch["token_lens"], batch["ref_mel"],
                                   ref_lens, ref_emb=batch.get("ref_emb"), language=batch.get("language"))
        out = self.decoder(batch["mel"], memory, mask, batch["mel_lens"], batch["token_lens"],
                           tokens.shape[1])
        out["voice"] = memory[:, tokens.shape[1]:].mean(dim=1)  # (B, d): the latents' mean
        out["heard"] = ref_lens > 0  # (B,): rows that had a reference
        return out

    def losses(self, batch: dict, out: dict) -> dict:
        """0-dim tensors: loss (total), mel_l1, postnet_l1, attn_diag, and stop_bce,
        guided_attn (autoregressive) or duration, align (duration decoder); speaker with
        ``model.speaker_loss_weight`` (the reference kept in the conditioning)."""
        losses = self.decoder.losses(batch, out)
        if self.cfg.speaker_loss_weight > 0:
            losses["speaker"] = speaker_contrast(out["voice"], batch["speaker"], out["heard"])
            losses["loss"] = losses["loss"] + self.cfg.speaker_loss_weight * losses["speaker"]
        return losses

    def diagonality(self, batch: dict, out: dict, band: float = 0.1) -> torch.Tensor:
        return attention_diagonality(out["attn"], batch["token_lens"], batch["mel_lens"],
                                     self.cfg.reduction, band)

    # ------------------------------------------------------------------------ inference
    def conditioning(self, ref_mel, ref_lens, ref_emb=None) -> torch.Tensor:
        """ref_mel (B, Tr, M) raw log-mel, ref_lens (B,), ref_emb (B, 256) or None → latents
        (B, K, d), or (B, K+1, d) with the speaker embedding's. A row without a reference
        (ref_lens 0: the neutral voice) gets a zero embedding latent."""
        latents = self.ref_encoder(normalize_mel(ref_mel), ref_lens)  # (B, K, d)
        if self.speaker_proj is None:
            return latents
        if ref_emb is None:
            raise ValueError("this model conditions on the reference's speaker embedding "
                             "(model.speaker_embedding=ge2e); none was given")
        e = self.speaker_proj(ref_emb.to(latents.dtype)) * (ref_lens > 0)[:, None].to(latents.dtype)
        return torch.cat([latents, e[:, None]], dim=1)  # (B, K+1, d)

    @torch.no_grad()
    def voice_latents(self, ref_mel: torch.Tensor, ref_lens: torch.Tensor,
                      ref_emb: torch.Tensor | None = None) -> torch.Tensor:
        """References ref_mel (B, Tr, M) raw log-mel, ref_lens (B,) (and ref_emb (B, 256)) →
        their conditioning latents (B, K(+1), d), as ``generate`` computes them, for voices
        used many times."""
        was_training = self.training
        self.eval()
        try:
            return self.conditioning(ref_mel, ref_lens, ref_emb)
        finally:
            self.train(was_training)

    @torch.no_grad()
    def generate(self, tokens, token_lens, ref_mel, ref_lens, max_steps=None,
                 stop_threshold=None, generator: torch.Generator | None = None, speed: float = 1.0,
                 latents=None, ref_emb=None, language=None):
        """Synthesis of a batch of sentences, each ending on its own: on its stop token
        (autoregressive, KV-cached; a stop counts only once the sentence's alignment has reached
        mel_decoder.MIN_PROGRESS of its text) or after its predicted durations. → mels (B, T, M)
        raw log-mel (silence past each length), mel_lens (B,), attn (B, T/r, Tt). Deterministic
        for a given ``generator`` state (it drives the always-on pre-net dropout; other dropout
        is off here). ``ref_lens == 0`` → neutral voice. A sentence longer than ``max_steps``
        decoder steps is cut there (its length says so). ``speed`` divides the duration decoder's
        predicted durations (faster speech); only that decoder takes one other than 1.
        ``latents`` (B, K, d): the references' conditioning, computed before; ``ref_emb``
        (B, 256): the references' speaker embeddings, for a model conditioned on them;
        ``language`` (B,): each sentence's row of the language table, for a model of several."""
        was_training = self.training
        self.eval()
        try:
            memory, mask = self.encode(tokens, token_lens, ref_mel, ref_lens,  # (B, Tt+K, d)
                                       latents, ref_emb, language)
            return self.decoder.generate(
                memory, mask, token_lens, tokens.shape[1], max_steps or self.cfg.max_decoder_steps,
                self.cfg.stop_threshold if stop_threshold is None else stop_threshold, generator, speed)
        finally:
            self.train(was_training)
